//! Where the project is: the matrix file named by `--matrix`, else the nearest
//! `matrix.yaml` in the current folder or a folder above it, as cargo finds `Cargo.toml`.
//! The folder of the matrix file is the project root: results (`target/ipc-matrix`,
//! unless `CARGO_TARGET_DIR` says otherwise) and baselines (`baselines/`) default to
//! folders in it, wherever the command is started from.

use ipc_matrix_spec::{SpecErrors, UnknownProfile};
use ipc_matrix_transport::RegisterError;
use std::path::{Path, PathBuf};

/// Why the project's matrix cannot be found or loaded.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    #[error("could not find {MATRIX_FILE} in {} or any folder above it; give the matrix file with --matrix FILE", start.display())]
    NotFound { start: PathBuf },
    #[error("the current folder cannot be read: {0}")]
    CurrentFolder(#[source] std::io::Error),
    /// A plugin whose name is taken (a built-in transport, or a stack this binary
    /// registered), or ill-formed.
    #[error("{}: plugins.{plugin}: {source}", matrix.display())]
    Plugin {
        matrix: PathBuf,
        plugin: String,
        #[source]
        source: RegisterError,
    },
    #[error(transparent)]
    Spec(#[from] SpecErrors),
    #[error(transparent)]
    Profile(#[from] UnknownProfile),
}

/// The matrix at `matrix`, its plugins (stacks in shared libraries, `plugins:`) loaded
/// and registered first, since its scenarios may name them. A library that cannot be
/// loaded, or whose loading crashes, hangs or exits a process of its own
/// (`plugin_probe`), is registered as broken without being loaded here, and fails its
/// cells; a plugin whose name is taken
/// (a built-in transport, or a stack this binary registered) is refused here.
pub fn load_matrix(matrix: &Path) -> Result<ipc_matrix_spec::Spec, ProjectError> {
    for plugin in ipc_matrix_spec::Spec::declared_plugins(matrix) {
        use crate::plugin_probe::{probe, Probed};
        let broken = |why: &str| {
            ipc_matrix_transport::register_broken_plugin(&plugin.name, &plugin.library, why)
        };
        // Registered with what its probe read, not loaded: no code of the library runs
        // in this process until a cell or check here calls into it.
        let registered = match probe(&plugin.name, &plugin.library) {
            Ok(Probed::Loaded(traits)) => {
                ipc_matrix_transport::register_probed_plugin(&plugin.name, &plugin.library, traits)
            }
            Ok(Probed::Refused(why)) => broken(&why),
            Err(why) => broken(&why.to_string()),
        };
        registered.map_err(|source| ProjectError::Plugin {
            matrix: matrix.to_path_buf(),
            plugin: plugin.name.clone(),
            source,
        })?;
    }
    Ok(ipc_matrix_spec::Spec::load(matrix)?)
}

/// The name looked for.
pub const MATRIX_FILE: &str = "matrix.yaml";

/// The nearest `matrix.yaml` in `start` or a folder above it.
pub fn find_matrix(start: &Path) -> Result<PathBuf, ProjectError> {
    start
        .ancestors()
        .map(|dir| dir.join(MATRIX_FILE))
        .find(|file| file.is_file())
        .ok_or_else(|| ProjectError::NotFound {
            start: start.to_path_buf(),
        })
}

/// The matrix file: `explicit` when given, else the nearest one from the current folder,
/// relative to it (`matrix.yaml`, `../../matrix.yaml`): paths derived from it, which
/// reports print, then read the same on every machine.
pub fn matrix_file(explicit: Option<&Path>) -> Result<PathBuf, ProjectError> {
    match explicit {
        Some(file) => Ok(file.to_path_buf()),
        None => {
            let here = std::env::current_dir().map_err(ProjectError::CurrentFolder)?;
            find_matrix(&here).map(|found| relative_to(&here, found))
        }
    }
}

/// `found`, a file in `start` or a folder above it, as a path from `start`.
fn relative_to(start: &Path, found: PathBuf) -> PathBuf {
    let Some(dir) = found.parent() else {
        return found;
    };
    match start.strip_prefix(dir) {
        Ok(below) => {
            let mut relative: PathBuf = below.components().map(|_| "..").collect();
            relative.push(MATRIX_FILE);
            relative
        }
        Err(_) => found,
    }
}

/// The project root: the folder the matrix file is in (`.` for a bare file name).
pub fn project_root(matrix: &Path) -> PathBuf {
    match matrix.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("ipc-matrix-project-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("a/b/c")).unwrap();
        dir
    }

    #[test]
    fn the_nearest_matrix_file_above_is_found() {
        let dir = scratch("found");
        std::fs::write(dir.join(MATRIX_FILE), "").unwrap();
        std::fs::write(dir.join("a/b").join(MATRIX_FILE), "").unwrap();
        assert_eq!(
            find_matrix(&dir.join("a/b/c")).ok(),
            Some(dir.join("a/b").join(MATRIX_FILE))
        );
        assert_eq!(
            find_matrix(&dir.join("a")).ok(),
            Some(dir.join(MATRIX_FILE))
        );
        assert_eq!(find_matrix(&dir).ok(), Some(dir.join(MATRIX_FILE)));
        assert_eq!(
            relative_to(&dir.join("a/b"), dir.join(MATRIX_FILE)),
            PathBuf::from("../../matrix.yaml")
        );
        assert_eq!(
            relative_to(&dir, dir.join(MATRIX_FILE)),
            PathBuf::from("matrix.yaml")
        );
        // A folder of that name is not a matrix file.
        std::fs::remove_file(dir.join(MATRIX_FILE)).unwrap();
        std::fs::create_dir(dir.join(MATRIX_FILE)).unwrap();
        let missing = find_matrix(&dir.join("a")).unwrap_err();
        assert!(matches!(&missing, ProjectError::NotFound { start } if *start == dir.join("a")));
        let missing = missing.to_string();
        assert!(
            missing.contains(&dir.join("a").display().to_string()),
            "{missing}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_project_root_is_the_matrix_files_folder() {
        assert_eq!(project_root(Path::new("matrix.yaml")), PathBuf::from("."));
        assert_eq!(project_root(Path::new("x/m.yaml")), PathBuf::from("x"));
        assert_eq!(
            project_root(Path::new("/p/matrix.yaml")),
            PathBuf::from("/p")
        );
    }
}
