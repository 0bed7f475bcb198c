//! The commit a run was made from, for history to order runs by: `GITHUB_SHA` in CI, else
//! the `HEAD` of the checkout around the current directory, read from `.git` itself (no
//! `git` process to wait on; worktrees and packed refs included).

use std::path::{Path, PathBuf};

/// The full hex id of the commit, or `None` outside a checkout.
pub fn current_commit() -> Option<String> {
    if let Ok(sha) = std::env::var("GITHUB_SHA") {
        if is_commit_id(sha.trim()) {
            return Some(sha.trim().to_string());
        }
    }
    head_of(&std::env::current_dir().ok()?)
}

/// `HEAD` of the repository `dir` is in.
pub fn head_of(dir: &Path) -> Option<String> {
    let git = git_dir(dir)?;
    let head = std::fs::read_to_string(git.join("HEAD")).ok()?;
    let head = head.trim();
    let Some(reference) = head.strip_prefix("ref: ") else {
        return is_commit_id(head).then(|| head.to_string());
    };
    // A worktree's branches live in the main repository's folder (`commondir`).
    let common = std::fs::read_to_string(git.join("commondir"))
        .ok()
        .map(|c| git.join(c.trim()))
        .unwrap_or_else(|| git.clone());
    for base in [&git, &common] {
        if let Ok(id) = std::fs::read_to_string(base.join(reference)) {
            let id = id.trim();
            if is_commit_id(id) {
                return Some(id.to_string());
            }
        }
    }
    let packed = std::fs::read_to_string(common.join("packed-refs")).ok()?;
    packed.lines().find_map(|line| {
        let (id, name) = line.split_once(' ')?;
        (name == reference && is_commit_id(id)).then(|| id.to_string())
    })
}

/// The `.git` folder of the checkout `dir` is in (a worktree's `.git` file points to it).
fn git_dir(dir: &Path) -> Option<PathBuf> {
    for folder in dir.ancestors() {
        let git = folder.join(".git");
        if git.is_dir() {
            return Some(git);
        }
        if let Ok(pointer) = std::fs::read_to_string(&git) {
            let target = pointer.trim().strip_prefix("gitdir: ")?;
            return Some(folder.join(target));
        }
    }
    None
}

fn is_commit_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_is_read_from_a_branch_a_packed_ref_or_a_detached_head() {
        let root = std::env::temp_dir().join(format!("ipc-matrix-commit-{}", std::process::id()));
        let git = root.join(".git");
        std::fs::create_dir_all(git.join("refs/heads")).unwrap();
        let sub = root.join("crates/x");
        std::fs::create_dir_all(&sub).unwrap();
        let (a, b) = ("a".repeat(40), "b".repeat(40));

        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(git.join("refs/heads/main"), format!("{a}\n")).unwrap();
        assert_eq!(head_of(&sub), Some(a.clone()));

        std::fs::remove_file(git.join("refs/heads/main")).unwrap();
        std::fs::write(
            git.join("packed-refs"),
            format!("# pack-refs with: peeled\n{b} refs/heads/main\n"),
        )
        .unwrap();
        assert_eq!(head_of(&sub), Some(b.clone()));

        std::fs::write(git.join("HEAD"), format!("{a}\n")).unwrap();
        assert_eq!(head_of(&root), Some(a));

        std::fs::write(git.join("HEAD"), "garbage\n").unwrap();
        assert_eq!(head_of(&root), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
