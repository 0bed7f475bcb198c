//! `ipc-matrix init`: what a repository needs to measure its own stack with ipc-matrix: a
//! commented matrix.yaml, a baselines/ folder (a README saying how to fill it), and a
//! GitHub workflow that installs this ipc-matrix, pinned by commit, and runs every target
//! of matrix.yaml on a runner of its CPU, reports in the job summary. Nothing is written
//! over: a file already there stops the command before any file is written, unless
//! `--force`. What it writes is checked as the commands that read it will check it.
//! Everything is decided before anything is written, and the files are written all whole
//! or none ([`Plan`]): a refused or failed init leaves the folder as it was.

use crate::exit_code;
use anyhow::{bail, Context, Result};
use std::io::Write;
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

/// The parser of `--plugin`: [`Text`](crate::cli::args::Text) (a value that is not UTF-8
/// is refused naming the flag and showing the value), then [`plugin_arg`].
pub fn plugin_parser() -> impl clap::builder::TypedValueParser<Value = PluginArg> {
    use clap::builder::TypedValueParser;
    crate::cli::args::Text.try_map(|text| plugin_arg(&text))
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
    let plan = Plan::decide(dir, &written, force)?;
    plan.write()?;
    for file in &plan.files {
        eprintln!("     Created {}", file.path.display());
    }
    eprintln!(
        "ipc-matrix {} pinned at {rev} in the workflow. Next: `ipc-matrix run` here; after the \
         first push, accept the runners' results (baselines/README.md says how) and commit \
         matrix.yaml, baselines/ and .github/.",
        env!("CARGO_PKG_VERSION")
    );
    Ok(exit_code::OK)
}

/// What `init` writes where, decided before anything is written: the folders to make,
/// shallowest first, and each file.
struct Plan<'a> {
    folders: Vec<PathBuf>,
    files: Vec<PlannedFile<'a>>,
}

struct PlannedFile<'a> {
    path: PathBuf,
    text: &'a str,
    /// A regular file is there already (written over: `--force`).
    replaces: bool,
}

impl<'a> Plan<'a> {
    /// Looks at every folder on each file's path below `dir` and at each file's place:
    /// whatever would make a write fail half-way refuses the whole command here.
    fn decide(dir: &Path, written: &'a Written, force: bool) -> Result<Self> {
        let mut refusals = Vec::new();
        let mut folders = Vec::new();
        let mut files = Vec::new();
        'files: for (relative, text) in &written.files {
            let path = dir.join(relative);
            let mut folder = dir.to_path_buf();
            let mut missing_above = false;
            for part in Path::new(relative)
                .parent()
                .into_iter()
                .flat_map(Path::components)
            {
                folder.push(part);
                if missing_above {
                    if !folders.contains(&folder) {
                        folders.push(folder.clone());
                    }
                    continue;
                }
                match find_folder(&folder)? {
                    Folder::There => {}
                    Folder::Missing => {
                        missing_above = true;
                        if !folders.contains(&folder) {
                            folders.push(folder.clone());
                        }
                    }
                    Folder::Refused(what) => {
                        let refusal = format!(
                            "{} is {what}, not a folder, and init writes {} in it (move it away, or give init another folder)",
                            folder.display(),
                            path.display()
                        );
                        if !refusals.contains(&refusal) {
                            refusals.push(refusal);
                        }
                        continue 'files;
                    }
                }
            }
            let replaces = match path.symlink_metadata() {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
                Err(e) => bail!("{}: {e}; nothing written", path.display()),
                Ok(meta) if meta.file_type().is_file() => true,
                Ok(meta) => {
                    refusals.push(format!(
                        "{} is {}, not a file: init writes only over files, even with --force (move it away)",
                        path.display(),
                        what_is(meta.file_type())
                    ));
                    continue;
                }
            };
            files.push(PlannedFile {
                path,
                text,
                replaces,
            });
        }
        if !refusals.is_empty() {
            bail!("{}; nothing written", refusals.join("; "));
        }
        let there: Vec<String> = files
            .iter()
            .filter(|f| f.replaces)
            .map(|f| f.path.display().to_string())
            .collect();
        if !there.is_empty() && !force {
            bail!(
                "{} already there; nothing written (--force writes over them)",
                there.join(", ")
            );
        }
        Ok(Self { folders, files })
    }

    /// Writes every file whole, or none: the folders made, each file staged beside its
    /// place, then, all staged, each renamed into place. On a failure, what this wrote is
    /// removed again (a file it wrote over stays written over).
    fn write(&self) -> Result<()> {
        let mut undo = Undo::default();
        for folder in &self.folders {
            std::fs::create_dir(folder).map_err(|e| {
                anyhow::anyhow!("making {}: {e}; nothing written", folder.display())
            })?;
            undo.folders.push(folder.clone());
        }
        for file in &self.files {
            let staged = staged_path(&file.path);
            let mut out = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&staged)
                .map_err(|e| {
                    anyhow::anyhow!("writing {}: {e}; nothing written", staged.display())
                })?;
            undo.staged.push(staged.clone());
            // Synced, so that a crash after the rename cannot leave an empty file there.
            out.write_all(file.text.as_bytes())
                .and_then(|()| out.sync_all())
                .map_err(|e| {
                    anyhow::anyhow!("writing {}: {e}; nothing written", file.path.display())
                })?;
        }
        let mut staged = std::mem::take(&mut undo.staged).into_iter();
        for file in &self.files {
            let from = staged.next().expect("each file staged");
            if let Err(e) = std::fs::rename(&from, &file.path) {
                let but = match undo.replaced.is_empty() {
                    true => String::new(),
                    false => {
                        let over: Vec<String> = undo
                            .replaced
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect();
                        format!(" but {} (written over)", over.join(", "))
                    }
                };
                undo.staged = std::iter::once(from.clone()).chain(staged).collect();
                bail!(
                    "renaming {} to {}: {e}; nothing written{but}",
                    from.display(),
                    file.path.display()
                );
            }
            match file.replaces {
                true => undo.replaced.push(file.path.clone()),
                false => undo.placed.push(file.path.clone()),
            }
        }
        undo.finished = true;
        Ok(())
    }
}

/// What a write made so far, removed when dropped before it finished: new files in
/// their places, staged files, then the folders it made, deepest first, if empty.
#[derive(Default)]
struct Undo {
    folders: Vec<PathBuf>,
    staged: Vec<PathBuf>,
    placed: Vec<PathBuf>,
    replaced: Vec<PathBuf>,
    finished: bool,
}

impl Drop for Undo {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        for file in self.placed.iter().chain(&self.staged) {
            let _ = std::fs::remove_file(file);
        }
        for folder in self.folders.iter().rev() {
            let _ = std::fs::remove_dir(folder);
        }
    }
}

/// Where a file is written before it is renamed into place: beside it, hidden, this
/// process's.
fn staged_path(path: &Path) -> PathBuf {
    let name = path.file_name().expect("a file name").to_string_lossy();
    path.with_file_name(format!(".{name}.init-{}", std::process::id()))
}

/// A folder on a written file's path, as `init` finds it.
enum Folder {
    /// A folder, or a symlink to one.
    There,
    Missing,
    /// Something else, in words.
    Refused(String),
}

/// What is at `folder`; a symlink is followed to see whether it leads to a folder.
fn find_folder(folder: &Path) -> Result<Folder> {
    let meta = match folder.symlink_metadata() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Folder::Missing),
        Err(e) => bail!("{}: {e}; nothing written", folder.display()),
        Ok(meta) => meta,
    };
    if meta.is_dir() {
        return Ok(Folder::There);
    }
    if !meta.file_type().is_symlink() {
        return Ok(Folder::Refused(what_is(meta.file_type()).to_owned()));
    }
    match std::fs::metadata(folder) {
        Ok(target) if target.is_dir() => Ok(Folder::There),
        Ok(target) => Ok(Folder::Refused(format!(
            "a symlink to {}",
            what_is(target.file_type())
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(Folder::Refused("a symlink to nothing".to_owned()))
        }
        Err(e) => bail!("{}: {e}; nothing written", folder.display()),
    }
}

/// What an entry is, in words (a symlink as itself).
fn what_is(kind: std::fs::FileType) -> &'static str {
    if kind.is_file() {
        "a file"
    } else if kind.is_symlink() {
        "a symlink"
    } else {
        ipc_matrix_results::describe_file_kind(kind)
    }
}
