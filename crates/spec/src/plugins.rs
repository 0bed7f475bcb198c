//! Stacks in shared libraries, declared in matrix.yaml's `plugins:` (the C ABI of the
//! transport crate's `include/ipc_matrix_stack.h`): each a stack's name and its library.
//!
//! They are read before the rest of the file is checked ([`Spec::declared_plugins`]): a
//! scenario may list a plugin's stack only once it is registered, which loading the
//! library does. [`Spec::load`] then checks the section with the rest, located.

use crate::model::Spec;
use crate::stack::{check_name, StackNameError};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where a library's path names the CPU the matrix runs on (x86_64, aarch64, s390x, ...),
/// so that one matrix.yaml serves every leg.
pub const ARCH_PLACEHOLDER: &str = "{arch}";

/// The longest library path matrix.yaml may give, in bytes.
pub const MAX_LIBRARY_PATH_BYTES: usize = 4096;

/// One `plugins:` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPlugin {
    pub library: String,
}

/// A stack in a shared library: its name, and its library's path for this process's CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plugin {
    pub name: String,
    pub library: PathBuf,
}

impl Spec {
    /// The well-formed `plugins:` entries of the matrix file at `file`, their libraries'
    /// paths with [`ARCH_PLACEHOLDER`] replaced by this CPU's name and made absolute from
    /// the file's folder. Nothing else of the file is checked here: what is wrong with it
    /// (an ill-formed entry included) is [`Spec::load`]'s to say.
    pub fn declared_plugins(file: &Path) -> Vec<Plugin> {
        #[derive(Deserialize)]
        struct OnlyPlugins {
            #[serde(default)]
            plugins: BTreeMap<String, serde_yaml::Value>,
        }
        let Ok(text) = crate::validate::read_matrix(file) else {
            return Vec::new();
        };
        // Read as a YAML value first, which refuses a key written twice (two plugins of
        // one name): such a file loads no library, and Spec::load says where.
        let Ok(only) = serde_yaml::from_str::<serde_yaml::Value>(&text)
            .and_then(serde_yaml::from_value::<OnlyPlugins>)
        else {
            return Vec::new();
        };
        only.plugins
            .into_iter()
            .filter_map(|(name, value)| {
                let raw: RawPlugin = serde_yaml::from_value(value).ok()?;
                check_plugin(&name, &raw).ok()?;
                Some(Plugin {
                    library: resolve(file, &raw.library),
                    name,
                })
            })
            .collect()
    }
}

/// What is wrong with a `plugins:` entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PluginEntryError {
    #[error(transparent)]
    Name(#[from] StackNameError),
    #[error("`library` is empty: give the path of the shared library (relative to matrix.yaml; {{arch}} is the CPU's name)")]
    EmptyLibrary,
    #[error("`library` is not a path of at most {MAX_LIBRARY_PATH_BYTES} bytes without NUL")]
    LibraryPath,
}

/// What is wrong with a `plugins:` entry, if anything.
pub(crate) fn check_plugin(name: &str, raw: &RawPlugin) -> Result<(), PluginEntryError> {
    check_name(name)?;
    if raw.library.trim().is_empty() {
        return Err(PluginEntryError::EmptyLibrary);
    }
    if raw.library.len() > MAX_LIBRARY_PATH_BYTES || raw.library.contains('\0') {
        return Err(PluginEntryError::LibraryPath);
    }
    Ok(())
}

/// `library` for this CPU, from the folder of the matrix file at `file`.
fn resolve(file: &Path, library: &str) -> PathBuf {
    let library = PathBuf::from(library.replace(ARCH_PLACEHOLDER, std::env::consts::ARCH));
    let folder = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let joined = folder.join(library);
    std::path::absolute(&joined).unwrap_or(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_is_found_from_the_matrix_files_folder_for_this_cpu() {
        let dir = std::env::temp_dir().join(format!("ipcm-plugins-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("matrix.yaml");
        std::fs::write(
            &file,
            "plugins:\n  seqpacket: { library: 'build/{arch}/libs.so' }\n  Bad: { library: x }\n  empty: { library: '' }\nanything: else\n",
        )
        .unwrap();
        let found = Spec::declared_plugins(&file);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            found,
            vec![Plugin {
                name: "seqpacket".into(),
                library: dir
                    .join("build")
                    .join(std::env::consts::ARCH)
                    .join("libs.so"),
            }]
        );
    }
}
