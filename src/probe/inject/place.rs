//! Where `gpuscope run` and `gpuscope probe path` put the probe's code:
//! a directory that only this user can have made, reached without
//! following a link, whose real path goes on `PYTHONPATH`.
//!
//! The usual place is `$XDG_RUNTIME_DIR/gpuscope/python`, else
//! `$TMPDIR/gpuscope-UID/python` (`/tmp` without `TMPDIR`): reused from run
//! to run, so nothing piles up although `run` replaces itself with the
//! command and cannot clean up after it. Another user can squat that name
//! in `/tmp` (a link, a directory of theirs); then the probe goes into a
//! fresh directory with an unpredictable name beside it (mkdtemp), and the
//! caller says so. Such a directory is left behind: the job's processes,
//! and children they start hours later, import from it. The runtime
//! directory is emptied at logout and `/tmp` by the system's cleaner.
//! The directories and files themselves are judged and written by the
//! rules of every file gpuscope keeps for itself (`util/own_files.rs`).

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::util::current_uid;
use crate::util::dirfd::{DirFd, random_hex};
use crate::util::own_files::{Payload, open_private, private_child, runtime_roots, write_ours};

/// The first line of every `gpuscope_probe.py` gpuscope has shipped: how a
/// file gpuscope wrote is told apart from one it must not replace.
pub const PROBE_MARKER: &str = "\"\"\"gpuscope allocator probe";
pub const SITE_MARKER: &str = "\"\"\"gpuscope's sitecustomize shim";
const FRESH_TRIES: usize = 16;

/// The directory the payloads were written to, and a one-line warning
/// when it is not the usual place.
#[derive(Debug)]
pub struct Placed {
    pub dir: PathBuf,
    pub warning: Option<String>,
}

/// Writes `payloads` into the usual place, else a fresh private directory
/// beside it; when the runtime directory allows neither, the temporary
/// directory is tried the same way. `Err` only when nothing works: the
/// caller then goes on without them.
pub fn place(payloads: &[Payload]) -> Result<Placed, String> {
    let mut reasons = Vec::new();
    for root in runtime_roots() {
        let (root, base) = match root {
            Ok(root) => root,
            Err(why) => {
                reasons.push(why);
                continue;
            }
        };
        for attempt in [usual, fresh] {
            match attempt(&root, &base, payloads) {
                Ok(dir) => {
                    let warning =
                        reasons.first().map(|why| format!("{why}; using {} for the probe instead", dir.display()));
                    return Ok(Placed { dir, warning });
                }
                Err(why) => reasons.push(why),
            }
        }
    }
    Err(reasons.join("; "))
}

fn usual(root: &DirFd, base: &str, payloads: &[Payload]) -> Result<PathBuf, String> {
    let base = private_child(root, OsStr::new(base))?;
    let python = private_child(&base, OsStr::new("python"))?;
    fill(&python, payloads)
}

fn fresh(root: &DirFd, base: &str, payloads: &[Payload]) -> Result<PathBuf, String> {
    for _ in 0..FRESH_TRIES {
        let name = OsString::from(format!("{base}.{}", random_hex()));
        match root.mkdir(&name, 0o700) {
            Ok(true) => return fill(&open_private(root, &name, true)?, payloads),
            Ok(false) => continue,
            Err(e) => return Err(format!("cannot create a directory in {}: {e}", root.path.display())),
        }
    }
    Err(format!("cannot create a fresh directory in {}", root.path.display()))
}

fn fill(dir: &DirFd, payloads: &[Payload]) -> Result<PathBuf, String> {
    for p in payloads {
        write_ours(dir, p)?;
    }
    real_path(dir)
}

/// The directory's path with every link resolved, accepted only if it
/// still names the directory that was opened and no other user can swap
/// any directory on it: each is owned by root or this user, and one that
/// others may write to is sticky. Python looks the path up again at every
/// import, hours later in a spawned child, so the path has to stay true.
fn real_path(dir: &DirFd) -> Result<PathBuf, String> {
    let shown = dir.path.display();
    let real = std::fs::canonicalize(&dir.path).map_err(|e| format!("cannot resolve {shown}: {e}"))?;
    let named = std::fs::metadata(&real).map_err(|e| format!("cannot stat {}: {e}", real.display()))?;
    if !dir.is(&named) {
        return Err(format!("{shown} changed while gpuscope was writing to it"));
    }
    if real.as_os_str().as_encoded_bytes().contains(&b':') {
        return Err(format!("{} contains ':', which PYTHONPATH cannot hold", real.display()));
    }
    for ancestor in real.ancestors() {
        steady(ancestor)?;
    }
    Ok(real)
}

fn steady(dir: &Path) -> Result<(), String> {
    let m = std::fs::symlink_metadata(dir).map_err(|e| format!("cannot stat {}: {e}", dir.display()))?;
    let me = current_uid();
    if !m.is_dir() || (m.uid() != 0 && m.uid() != me) || (m.mode() & 0o022 != 0 && m.mode() & 0o1000 == 0) {
        return Err(format!("{} could be changed by another user", dir.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn root() -> (tempfile::TempDir, DirFd) {
        let t = tempfile::tempdir().unwrap();
        let d = DirFd::open(t.path()).unwrap();
        (t, d)
    }

    #[test]
    fn the_real_path_must_name_what_was_opened() {
        let (t, root) = root();
        let dir = private_child(&root, OsStr::new("d")).unwrap();
        assert_eq!(real_path(&dir).unwrap(), std::fs::canonicalize(t.path().join("d")).unwrap());
        // Swapped for another directory after it was opened.
        std::fs::rename(t.path().join("d"), t.path().join("moved")).unwrap();
        std::fs::create_dir(t.path().join("d")).unwrap();
        assert!(real_path(&dir).unwrap_err().contains("changed"));
    }

    #[test]
    fn a_world_writable_directory_without_the_sticky_bit_is_not_steady() {
        let t = tempfile::tempdir().unwrap();
        let open = t.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(steady(&open).is_err());
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        steady(&open).unwrap();
    }
}
