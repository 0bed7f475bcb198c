//! The book (`docs/`, built by `mdbook build docs` in the test command) and README: every
//! page SUMMARY.md names exists and every page is named there; every relative link of the
//! book and of README reaches a file, and its `#anchor` a heading of that file; README
//! stays one or two screens; the command-line page names every command and exit code.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The markdown files under `dir`, recursively.
fn pages(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(pages(&path));
        } else if path.extension().is_some_and(|e| e == "md") {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// The targets of the inline links of `text` outside code (fenced blocks and `code`
/// spans), with the line each is on.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans are left out: `a](b)` in one is no link.
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, part)| part)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            found.push((n + 1, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    found
}

/// The anchors of a page's headings, as mdbook and GitHub make them: lower case, spaces
/// to dashes, other punctuation dropped.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut found = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        found.insert(slug);
    }
    found
}

/// What is wrong with the relative links of the page at `path` whose text is `text`.
fn broken_links(path: &Path, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let dir = path.parent().unwrap();
    for (line, target) in links(text) {
        if target.starts_with("http://")
            || target.starts_with("https://")
            || target.starts_with("mailto:")
        {
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((file, anchor)) => (file, Some(anchor)),
            None => (target.as_str(), None),
        };
        let linked = if file.is_empty() {
            path.to_path_buf()
        } else {
            dir.join(file)
        };
        if !linked.exists() {
            problems.push(format!("{}:{line}: {target}: no such file", path.display()));
            continue;
        }
        if let Some(anchor) = anchor {
            let is_page = linked.extension().is_some_and(|e| e == "md");
            // A link within the page is checked against the text given, not the file.
            let headings = if file.is_empty() {
                anchors(text)
            } else {
                anchors(&read(&linked))
            };
            if is_page && !headings.contains(anchor) {
                problems.push(format!(
                    "{}:{line}: {target}: no heading #{anchor} in {}",
                    path.display(),
                    linked.display()
                ));
            }
        }
    }
    problems
}

#[test]
fn every_relative_link_of_the_book_and_of_readme_reaches_its_file_and_heading() {
    let root = repo();
    let mut all = pages(&root.join("docs/src"));
    all.push(root.join("README.md"));
    let problems: Vec<String> = all
        .iter()
        .flat_map(|page| broken_links(page, &read(page)))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_link_check_catches_a_missing_file_and_a_missing_heading() {
    let root = repo();
    let page = root.join("docs/src/introduction.md");
    let text = "# Intro\n\nSee [setup](guide/setup.md), [gone](guide/gone.md), \
                [here](#intro), [nowhere](#nowhere), [no heading](guide/setup.md#no-such) \
                and `[code](not/a/link.md)`.\n\n```\n[fenced](not/a/link.md)\n```\n";
    let problems = broken_links(&page, text);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(
        problems[0].contains("guide/gone.md: no such file"),
        "{problems:#?}"
    );
    assert!(problems[1].contains("#nowhere"), "{problems:#?}");
    assert!(problems[2].contains("no heading #no-such"), "{problems:#?}");
}

#[test]
fn summary_names_every_page_and_every_page_it_names_exists() {
    let src = repo().join("docs/src");
    let summary = read(&src.join("SUMMARY.md"));
    let named: BTreeSet<PathBuf> = links(&summary)
        .into_iter()
        .map(|(_, target)| src.join(target))
        .collect();
    for page in &named {
        assert!(
            page.is_file(),
            "SUMMARY.md names {}, which is missing",
            page.display()
        );
    }
    for page in pages(&src) {
        if page.file_name().is_some_and(|n| n == "SUMMARY.md") {
            continue;
        }
        assert!(
            named.contains(&page),
            "{} is in no chapter of SUMMARY.md",
            page.display()
        );
    }
}

#[test]
fn readme_stays_one_or_two_screens() {
    let lines = read(&repo().join("README.md")).lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines; the book holds the rest"
    );
}

#[test]
fn the_command_line_page_names_every_command_and_exit_code() {
    let page = read(&repo().join("docs/src/reference/cli.md"));
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_ipc-matrix"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let commands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 5, "{help}");
    for command in commands {
        assert!(
            page.contains(&format!("`ipc-matrix {command}")),
            "docs/src/reference/cli.md does not name `ipc-matrix {command}`"
        );
    }
    let lib = read(&repo().join("crates/cli/src/lib.rs"));
    let codes: Vec<&str> = lib
        .lines()
        .filter(|l| l.trim_start().starts_with("pub const") && l.contains(": u8 ="))
        .filter_map(|l| l.split('=').nth(1))
        .map(|v| v.trim().trim_end_matches(';'))
        .collect();
    assert!(codes.len() >= 4, "{codes:?}");
    for code in codes {
        assert!(
            page.contains(&format!("| `{code}` |")),
            "docs/src/reference/cli.md does not say what exit code {code} means"
        );
    }
}

#[test]
fn the_environment_page_names_every_variable_and_no_other() {
    let page = read(&repo().join("docs/src/reference/environment.md"));
    for variable in ipc_matrix_results::VARIABLES {
        assert!(
            page.contains(&format!("| `{}` |", variable.name)),
            "docs/src/reference/environment.md does not name {}",
            variable.name
        );
    }
    for word in page.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if word.starts_with("IPC_MATRIX_") && word != "IPC_MATRIX_" {
            assert!(
                ipc_matrix_results::VARIABLES.iter().any(|v| v.name == word),
                "the page names {word}, which is not in the table"
            );
        }
    }
}
