//! What `.cargo/config.toml` says, read as TOML: the runner of a target (QEMU for an
//! emulated one), as cargo itself would take it.

use anyhow::{bail, Context, Result};
use std::path::Path;

/// The environment variable that overrides a target's runner, as cargo names it:
/// `CARGO_TARGET_<TRIPLE>_RUNNER`, the triple upper-cased with `-` and `.` as `_`.
pub fn runner_variable(triple: &str) -> String {
    let name: String = triple
        .chars()
        .map(|c| match c {
            '-' | '.' => '_',
            c => c.to_ascii_uppercase(),
        })
        .collect();
    format!("CARGO_TARGET_{name}_RUNNER")
}

/// The runner of `triple` in a config file's text: `runner` of `[target.<triple>]`, an
/// array of words or one string of words separated by spaces (cargo takes both). None
/// when the target has none (it runs natively).
pub fn runner_in(config: &str, triple: &str) -> Result<Option<Vec<String>>> {
    let table: toml::Table = config.parse().context(".cargo/config.toml is not TOML")?;
    let Some(runner) = table
        .get("target")
        .and_then(|t| t.get(triple))
        .and_then(|t| t.get("runner"))
    else {
        return Ok(None);
    };
    let words = match runner {
        toml::Value::String(line) => line.split_whitespace().map(str::to_owned).collect(),
        toml::Value::Array(items) => items
            .iter()
            .map(|item| {
                item.as_str().map(str::to_owned).with_context(|| {
                    format!(
                        "target.{triple}.runner in .cargo/config.toml holds a value of type {}, not a string",
                        item.type_str()
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?,
        other => bail!(
            "target.{triple}.runner in .cargo/config.toml is of type {}, not a string or an array of strings",
            other.type_str()
        ),
    };
    Ok((!words.is_empty()).then_some(words))
}

/// The runner cargo uses for `triple` in the repository at `root`: the environment's
/// `CARGO_TARGET_<TRIPLE>_RUNNER` first, then `.cargo/config.toml`.
pub fn runner(root: &Path, triple: &str) -> Result<Option<Vec<String>>> {
    if let Ok(line) = std::env::var(runner_variable(triple)) {
        let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        return Ok((!words.is_empty()).then_some(words));
    }
    let path = root.join(".cargo/config.toml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    runner_in(&text, triple)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
[target.aarch64-unknown-linux-gnu]
linker = "aarch64-linux-gnu-gcc"
runner = ["scripts/qemu-run", "aarch64", "aarch64-linux-gnu"]

[target.x86_64-unknown-linux-musl]
runner = "scripts/qemu-run x86_64 static"

[target.riscv64gc-unknown-linux-gnu]
linker = "riscv64-linux-gnu-gcc"
"#;

    #[test]
    fn a_runner_is_read_as_an_array_or_as_a_line_of_words() {
        assert_eq!(
            runner_in(CONFIG, "aarch64-unknown-linux-gnu").unwrap(),
            Some(vec![
                "scripts/qemu-run".into(),
                "aarch64".into(),
                "aarch64-linux-gnu".into()
            ])
        );
        assert_eq!(
            runner_in(CONFIG, "x86_64-unknown-linux-musl").unwrap(),
            Some(vec![
                "scripts/qemu-run".into(),
                "x86_64".into(),
                "static".into()
            ])
        );
        assert_eq!(
            runner_in(CONFIG, "riscv64gc-unknown-linux-gnu").unwrap(),
            None
        );
        assert_eq!(runner_in(CONFIG, "s390x-unknown-linux-gnu").unwrap(), None);
    }

    #[test]
    fn a_runner_of_another_shape_is_an_error_that_says_where() {
        let e = format!(
            "{:#}",
            runner_in("[target.a]\nrunner = 3\n", "a").unwrap_err()
        );
        assert!(
            e.contains("target.a.runner") && e.contains("of type integer"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            runner_in("[target.a]\nrunner = [\"x\", 1]\n", "a").unwrap_err()
        );
        assert!(e.contains("type integer, not a string"), "{e}");
        let e = format!("{:#}", runner_in("[target.a\n", "a").unwrap_err());
        assert!(e.starts_with(".cargo/config.toml is not TOML: "), "{e}");
    }

    #[test]
    fn the_variable_is_named_as_cargo_names_it() {
        assert_eq!(
            runner_variable("armv7-unknown-linux-gnueabihf"),
            "CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_RUNNER"
        );
        assert_eq!(
            runner_variable("thumbv7em-none-eabi.x"),
            "CARGO_TARGET_THUMBV7EM_NONE_EABI_X_RUNNER"
        );
    }
}
