//! The leftover sweep decides liveness by the creator's lock, never by a process id alone:
//! an artefact whose named creator is not a process here (another PID namespace) but whose
//! lock is held stays; once the lock is free it goes.

use ipc_matrix_transport::{remove_stale_artifacts_in, PrivateDir, ARTIFACT_PREFIX};
use std::fs::File;
use std::path::{Path, PathBuf};

/// A process id that names no process here: a child that has exited and been reaped.
fn gone_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// Two scratch folders standing in for /dev/shm and the temporary directory.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("sweep-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("shm")).unwrap();
        std::fs::create_dir_all(dir.join("tmp")).unwrap();
        Self(dir)
    }
    fn shm(&self) -> PathBuf {
        self.0.join("shm")
    }
    fn tmp(&self) -> PathBuf {
        self.0.join("tmp")
    }
    fn sweep(&self) -> Vec<PathBuf> {
        remove_stale_artifacts_in(&self.shm(), &self.tmp()).paths
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Makes `path` look as if it was last changed a minute ago: past the grace a sweep gives
/// artefacts whose creator may not have locked them yet.
fn age(path: &Path) {
    let minute_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    File::open(path).unwrap().set_modified(minute_ago).unwrap();
}

fn locked(path: &Path) -> File {
    let file = File::open(path).unwrap();
    file.lock_shared().unwrap();
    file
}

#[test]
fn a_locked_directory_of_a_creator_unknown_here_stays_until_its_lock_is_free() {
    let s = Scratch::new("dir");
    stays_until_its_lock_is_free(&s, &s.tmp());
}

/// A private directory in `parent` made by a creator unknown here, locked, then freed: a
/// sweep leaves it and all in it while the lock is held, and removes it once it is free.
fn stays_until_its_lock_is_free(s: &Scratch, parent: &Path) {
    let dir = parent.join(format!("{ARTIFACT_PREFIX}{}.0.0", gone_pid()));
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join(".alive"), b"").unwrap();
    std::fs::write(dir.join("cell.log"), b"a live run's log").unwrap();
    let lock = locked(&dir.join(".alive"));
    age(&dir);
    assert!(s.sweep().is_empty(), "a live run's directory was removed");
    assert!(dir.join(".alive").is_file() && dir.join("cell.log").is_file());
    drop(lock);
    assert_eq!(s.sweep(), vec![dir.clone()]);
    assert!(!dir.exists());
}

#[test]
fn a_locked_segment_of_a_creator_unknown_here_stays_until_its_lock_is_free() {
    let s = Scratch::new("segment");
    let segment = s.shm().join(format!("{ARTIFACT_PREFIX}{}.0.0", gone_pid()));
    std::fs::write(&segment, [0u8; 4096]).unwrap();
    let lock = locked(&segment);
    age(&segment);
    assert!(s.sweep().is_empty(), "a live run's segment was removed");
    drop(lock);
    assert_eq!(s.sweep(), vec![segment.clone()]);
}

/// A private directory for sockets goes to /dev/shm when the temporary directory's path is
/// too long for their names: it is swept there as in the temporary directory, and the
/// segments' sweep does not take it for a segment.
#[test]
fn a_private_directory_among_the_segments_is_swept_as_a_directory() {
    let s = Scratch::new("dir-in-shm");
    stays_until_its_lock_is_free(&s, &s.shm());
}

#[test]
fn a_fresh_artefact_with_a_free_lock_is_left_for_a_later_sweep() {
    // Its creator makes it, then locks it: a sweep in between must not take it.
    let s = Scratch::new("fresh");
    let segment = s.shm().join(format!("{ARTIFACT_PREFIX}{}.0.0", gone_pid()));
    std::fs::write(&segment, [0u8; 64]).unwrap();
    assert!(s.sweep().is_empty());
    age(&segment);
    assert_eq!(s.sweep(), vec![segment]);
}

#[test]
fn a_recent_artefact_without_a_lock_is_left_alone() {
    // Made by an older ipc-matrix, or caught between its creation and its lock.
    let s = Scratch::new("unlocked");
    let dir = s.tmp().join(format!("{ARTIFACT_PREFIX}{}.0.0", gone_pid()));
    std::fs::create_dir(&dir).unwrap();
    assert!(s.sweep().is_empty());
    assert!(dir.is_dir());
}

/// iceoryx2's names in /dev/shm carry no lock of their own: `<prefix>alive`, held by the
/// channel's creator, speaks for every name of its prefix. They stay while it is held, go
/// once it is free, and go without it (it is made first and removed last) once they are
/// over a second old.
#[test]
fn iceoryx2_names_go_with_their_prefix_lock_or_without_one() {
    let s = Scratch::new("iceoryx2");
    let names = |prefix: &str| {
        [
            "alive",
            "0354a2_1584.data",
            "9204dd_node.0_10_0.global_mgmt",
        ]
        .map(|n| s.shm().join(format!("{prefix}{n}")))
    };
    let live = names("iox2.0123456789ab.");
    let dead = names("iox2.00000000cafe.");
    let orphans = names("iox2.0000000beef0.");
    for path in live.iter().chain(&dead).chain(&orphans) {
        std::fs::write(path, b"").unwrap();
    }
    std::fs::remove_file(&orphans[0]).unwrap();
    // Not iceoryx2's names of ours: left alone whatever their age.
    let foreign = s.shm().join("iox2_node.0_10_0.global_mgmt");
    std::fs::write(&foreign, b"").unwrap();
    let lock = locked(&live[0]);
    assert!(
        s.sweep().is_empty(),
        "names younger than a second were removed"
    );
    for path in live
        .iter()
        .chain(&dead)
        .chain(&orphans[1..])
        .chain([&foreign])
    {
        age(path);
    }
    let mut expected: Vec<PathBuf> = dead.iter().chain(&orphans[1..]).cloned().collect();
    expected.sort();
    let mut swept = s.sweep();
    swept.sort();
    assert_eq!(swept, expected);
    assert!(live.iter().all(|p| p.exists()) && foreign.exists());
    drop(lock);
    let mut swept = s.sweep();
    swept.sort();
    let mut expected = live.to_vec();
    expected.sort();
    assert_eq!(swept, expected);
    assert!(foreign.exists());
}

#[test]
fn a_private_directory_of_this_process_survives_a_sweep_of_the_real_folders() {
    let dir = PrivateDir::create().unwrap();
    ipc_matrix_transport::remove_stale_artifacts();
    assert!(dir.path().is_dir());
    let path = dir.path().to_path_buf();
    drop(dir);
    assert!(!path.exists(), "dropping a private directory removes it");
}

#[test]
fn an_unnamed_file_has_no_name_and_opens_again_through_proc() {
    use std::io::{Read, Seek, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    let mut file = ipc_matrix_transport::unnamed_file().unwrap();
    // No directory entry at any moment: a crash leaves nothing to remove.
    assert_eq!(file.metadata().unwrap().nlink(), 0);
    assert_eq!(file.metadata().unwrap().mode() & 0o777, 0o600);
    file.write_all(b"first ").unwrap();
    // A library that opens its own file writes into the same one by this path.
    let again = format!("/proc/self/fd/{}", file.as_raw_fd());
    let mut other = std::fs::OpenOptions::new()
        .append(true)
        .open(&again)
        .unwrap();
    other.write_all(b"second").unwrap();
    drop(other);
    let mut back = String::new();
    file.rewind().unwrap();
    file.read_to_string(&mut back).unwrap();
    assert_eq!(back, "first second");
}
