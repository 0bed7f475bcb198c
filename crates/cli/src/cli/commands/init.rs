//! `ipc-matrix init`: what a repository needs to measure its own stack with ipc-matrix: a
//! commented matrix.yaml, a baselines/ folder (a README saying how to fill it), and a
//! GitHub workflow that installs this ipc-matrix, pinned by commit, and runs every target
//! of matrix.yaml on a runner of its CPU, reports in the job summary. Nothing is written
//! over: a file already there stops the command before any file is written, unless
//! `--force`. What it writes is checked as the commands that read it will check it.

use crate::exit_code;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The templates, in this folder's `init/`.
pub const MATRIX_TEMPLATE: &str = include_str!("init/matrix.yaml");
pub const WORKFLOW_TEMPLATE: &str = include_str!("init/workflow.yml");
const BASELINES_README: &str = include_str!("init/baselines.md");

/// Where ipc-matrix comes from: this workspace's `repository`.
pub const SOURCE_REPOSITORY: &str = env!("CARGO_PKG_REPOSITORY");

/// The commit this binary was built from (`build.rs`), if it was built in a checkout.
pub const SOURCE_COMMIT: Option<&str> = option_env!("IPCM_BUILT_FROM_COMMIT");

/// The files `init` writes, relative to the folder it writes into.
pub const WRITTEN: [&str; 3] = [
    "matrix.yaml",
    "baselines/README.md",
    ".github/workflows/ipc-matrix.yml",
];

/// A stack in a shared library, as `--plugin NAME=LIBRARY` gives it.
#[derive(Debug, Clone)]
pub struct PluginArg {
    pub name: String,
    pub library: String,
}

/// A `--plugin` value without its `=`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not NAME=LIBRARY (for example mystack=build/{{arch}}/libmystack.so)")]
pub struct NotAPluginArg(pub String);

/// Parses `--plugin NAME=LIBRARY`.
pub fn plugin_arg(text: &str) -> Result<PluginArg, NotAPluginArg> {
    let Some((name, library)) = text.split_once('=') else {
        return Err(NotAPluginArg(text.to_string()));
    };
    Ok(PluginArg {
        name: name.to_owned(),
        library: library.to_owned(),
    })
}

/// What `init` writes: each file's path (relative) and text.
#[derive(Debug)]
pub struct Written {
    pub files: Vec<(&'static str, String)>,
}

/// The three files for `plugin` (or the built-in transports alone) with ipc-matrix pinned
/// at `rev`, checked: the matrix file loads, and its legs make a job matrix.
pub fn render(plugin: Option<&PluginArg>, rev: &str) -> Result<Written> {
    if !(rev.len() == 40 && rev.bytes().all(|b| b.is_ascii_hexdigit())) {
        bail!("--rev `{rev}` is not a commit: give its full 40-digit hex id");
    }
    let (plugins, transports, build) = match plugin {
        None => (String::new(), "local, tcp".to_owned(), String::new()),
        Some(p) => {
            // JSON's string is a YAML double-quoted scalar: any path is written as given.
            let library = serde_json::to_string(&p.library).expect("a string serializes");
            let plugins = format!(
                "# Your stack, in a shared library with the C ABI of ipc-matrix's\n\
                 # crates/transport/include/ipc_matrix_stack.h, loaded by the measuring side and\n\
                 # the peer alike; the path is relative to this file, {{arch}} the CPU's name.\n\
                 plugins:\n  {}: {{ library: {library} }}\n",
                p.name
            );
            let build = format!(
                "      # Your stack's library, built for this runner's CPU where matrix.yaml looks\n\
                 \x20     # for it: {library}, {{arch}} being x86_64 or aarch64.\n\
                 \x20     - name: Build the stack's library\n\
                 \x20       run: |\n\
                 \x20         echo \"::error::.github/workflows/ipc-matrix.yml: put the command that builds the library here\"\n\
                 \x20         exit 1\n"
            );
            (plugins, format!("{}, local", p.name), build)
        }
    };
    let matrix = MATRIX_TEMPLATE
        .replace("{{PLUGINS}}", &plugins)
        .replace("{{TRANSPORTS}}", &transports);
    let workflow = WORKFLOW_TEMPLATE
        .replace("{{GIT}}", SOURCE_REPOSITORY)
        .replace("{{REV}}", rev)
        .replace("{{BUILD}}", &build);
    check_matrix(&matrix, plugin)?;
    Ok(Written {
        files: vec![
            (WRITTEN[0], matrix),
            (WRITTEN[1], BASELINES_README.to_owned()),
            (WRITTEN[2], workflow),
        ],
    })
}

/// The written matrix file loads as `run` loads it (its plugin's library need not be
/// built yet), and its legs make the workflow's job matrix.
fn check_matrix(matrix: &str, plugin: Option<&PluginArg>) -> Result<()> {
    let file = Path::new("matrix.yaml");
    if let Some(p) = plugin {
        ipc_matrix_transport::register_broken_plugin(
            &p.name,
            Path::new(&p.library),
            "not loaded by init",
        )
        .map_err(|why| anyhow::anyhow!("--plugin {}: {why}", p.name))?;
    }
    let spec = ipc_matrix_spec::Spec::parse(matrix, file).map_err(|e| {
        anyhow::anyhow!(
            "the matrix.yaml init would write is refused (give other --plugin values):\n{e}"
        )
    })?;
    ipc_matrix_spec::github::job_matrix(&spec).map_err(anyhow::Error::msg)?;
    Ok(())
}

/// `ipc-matrix init [DIR]`.
pub fn run(dir: &Path, plugin: Option<&PluginArg>, rev: Option<&str>, force: bool) -> Result<u8> {
    if !dir.is_dir() {
        bail!(
            "{}: no such folder (init writes into a folder that exists)",
            dir.display()
        );
    }
    let rev = rev.or(SOURCE_COMMIT).context(
        "this ipc-matrix was built outside a git checkout, so it cannot say which commit the workflow should install: give --rev <commit>",
    )?;
    let written = render(plugin, rev)?;
    let there: Vec<PathBuf> = written
        .files
        .iter()
        .map(|(path, _)| dir.join(path))
        .filter(|path| path.symlink_metadata().is_ok())
        .collect();
    if !there.is_empty() && !force {
        let list: Vec<String> = there.iter().map(|p| p.display().to_string()).collect();
        bail!(
            "{} already there; nothing written (--force writes over them)",
            list.join(", ")
        );
    }
    for (path, text) in &written.files {
        let path = dir.join(path);
        write_whole(&path, text).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("     Created {}", path.display());
    }
    eprintln!(
        "ipc-matrix {} pinned at {rev} in the workflow. Next: `ipc-matrix run` here; after the \
         first push, accept the runners' results (baselines/README.md says how) and commit \
         matrix.yaml, baselines/ and .github/.",
        env!("CARGO_PKG_VERSION")
    );
    Ok(exit_code::OK)
}

/// Writes `text` to `path` whole or not at all (a file beside it, renamed over it), its
/// folders made first.
fn write_whole(path: &Path, text: &str) -> std::io::Result<()> {
    let folder = path.parent().expect("a file in a folder");
    std::fs::create_dir_all(folder)?;
    let name = path.file_name().expect("a file name").to_string_lossy();
    let partial = folder.join(format!(".{name}.init-{}", std::process::id()));
    std::fs::write(&partial, text)?;
    std::fs::rename(&partial, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&partial);
    })
}
