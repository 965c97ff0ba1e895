//! gpuscope's own directory, `$XDG_RUNTIME_DIR/gpuscope`, else
//! `gpuscope-UID` in the temporary directory, and the files gpuscope keeps
//! in it: directories only this user can have made, reached without
//! following a link, and files replaced only when gpuscope wrote them.
//! The probe's code goes there (`probe::inject::place`), and so do the
//! boards' maximum clocks (`sources::nvml::boards`).

use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::util::current_uid;
use crate::util::dirfd::{DirFd, random_hex};

/// Larger than any file gpuscope writes; a bigger one is not ours.
const MAX_OURS: u64 = 1 << 20;

/// A file gpuscope writes: its name, text, the marker that recognises an
/// older copy, and its mode.
pub struct Payload<'a> {
    pub name: &'a str,
    pub text: &'a str,
    pub marker: &'a str,
    pub mode: u32,
}

/// gpuscope's own directory in the usual place (`$XDG_RUNTIME_DIR/gpuscope`,
/// else `gpuscope-UID` in the temporary directory), made private where
/// missing. `None` where no such place is this user's alone: what gpuscope
/// keeps there for itself (the board facts, `sources::nvml::boards`) then
/// goes unkept, rather than into a fresh directory each run.
pub fn own_dir() -> Option<DirFd> {
    runtime_roots().into_iter().flatten().find_map(|(root, base)| private_child(&root, OsStr::new(&base)).ok())
}

/// In order: `$XDG_RUNTIME_DIR` when it is this user's and closed to
/// others, then `$TMPDIR`, then `/tmp` when `TMPDIR` is unset or
/// unusable; each with the name of gpuscope's directory in it.
pub fn runtime_roots() -> Vec<Result<(DirFd, String), String>> {
    let me = current_uid();
    let mut roots = Vec::new();
    if let Some(xdg) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).filter(|p| p.is_absolute())
        && let Ok(dir) = DirFd::open(&xdg)
        && dir.metadata().is_ok_and(|m| m.uid() == me && m.mode() & 0o022 == 0)
    {
        roots.push(Ok((dir, "gpuscope".to_owned())));
    }
    for tmp in [std::env::var_os("TMPDIR").map(PathBuf::from), Some(PathBuf::from("/tmp"))].into_iter().flatten() {
        let root = DirFd::open(&tmp).map_err(|e| format!("{}: {e}", tmp.display())).and_then(shared_root);
        let usable = root.is_ok();
        roots.push(root.map(|dir| (dir, format!("gpuscope-{me}"))));
        if usable {
            break;
        }
    }
    roots
}

/// A directory others may write to only if it is sticky, so that nobody
/// but its owner can rename or remove what this user makes in it.
fn shared_root(dir: DirFd) -> Result<DirFd, String> {
    let m = dir.metadata().map_err(|e| format!("{}: {e}", dir.path.display()))?;
    let owner_ok = m.uid() == 0 || m.uid() == current_uid();
    let sticky_ok = m.mode() & 0o022 == 0 || m.mode() & 0o1000 != 0;
    if dir.path.is_absolute() && owner_ok && sticky_ok {
        Ok(dir)
    } else {
        Err(format!("{} is writable by others or not owned by root or you", dir.path.display()))
    }
}

/// Creates `name` (0700) unless it exists, opens it without following a
/// link, and accepts it only as a directory of this user's that nobody
/// else can enter. Its mode is set only when this call created it (the
/// umask may have taken bits away); a directory found is judged, never
/// changed.
pub fn private_child(parent: &DirFd, name: &OsStr) -> Result<DirFd, String> {
    let created =
        parent.mkdir(name, 0o700).map_err(|e| format!("cannot create {}: {e}", parent.path.join(name).display()))?;
    open_private(parent, name, created)
}

/// Opens `name` without following a link and judges it; `created`: this
/// process has just made it, so its mode is ours to set.
pub fn open_private(parent: &DirFd, name: &OsStr, created: bool) -> Result<DirFd, String> {
    let path = parent.path.join(name);
    let shown = path.display();
    let dir = parent.open_dir(name).map_err(|e| match e.raw_os_error() {
        // O_NOFOLLOW | O_DIRECTORY meets a link with ENOTDIR or ELOOP; the
        // second look is for the message only.
        Some(libc::ELOOP | libc::ENOTDIR) if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_symlink()) => {
            format!("{shown} is a symbolic link, not a directory of yours")
        }
        Some(libc::ENOTDIR) => format!("{shown} is not a directory"),
        _ => format!("cannot open {shown}: {e}"),
    })?;
    let m = dir.metadata().map_err(|e| format!("cannot stat {shown}: {e}"))?;
    let me = current_uid();
    if m.uid() != me {
        return Err(format!("{shown} belongs to uid {}, not to you (uid {me})", m.uid()));
    }
    if created && m.mode() & 0o777 != 0o700 {
        dir.set_mode(0o700).map_err(|e| format!("cannot set the mode of {shown}: {e}"))?;
    }
    let mode = dir.metadata().map_err(|e| format!("cannot stat {shown}: {e}"))?.mode() & 0o777;
    if mode != 0o700 {
        return Err(format!("{shown} has mode {mode:o}; gpuscope uses only a directory of mode 700"));
    }
    Ok(dir)
}

/// Writes a payload unless an identical copy is there. A file of that name
/// is replaced only when gpuscope wrote it (this user's, a regular file,
/// starting with the payload's marker); anything else is left alone.
pub fn write_ours(dir: &DirFd, p: &Payload) -> Result<(), String> {
    let name = OsStr::new(p.name);
    let path = dir.path.join(name);
    match existing(dir, name) {
        Ok(None) => {}
        Ok(Some(text)) if text == p.text => return Ok(()),
        Ok(Some(text)) if text.starts_with(p.marker) => {}
        Ok(Some(_)) => return Err(format!("{} was not written by gpuscope; not replacing it", path.display())),
        Err(why) => return Err(format!("{}: {why}; not replacing it", path.display())),
    }
    replace(dir, name, p).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// `Ok(None)`: no such file; `Ok(Some(text))`: this user's regular file.
pub fn existing(dir: &DirFd, name: &OsStr) -> Result<Option<String>, String> {
    let file = match dir.open_file(name) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err("a symbolic link".into()),
        Err(e) => return Err(e.to_string()),
    };
    let m = file.metadata().map_err(|e| e.to_string())?;
    if !m.is_file() {
        return Err("not a regular file".into());
    }
    if m.uid() != current_uid() {
        return Err(format!("belongs to uid {}", m.uid()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_OURS).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    // Not UTF-8 cannot be ours; an empty text matches no marker.
    Ok(Some(String::from_utf8(bytes).unwrap_or_default()))
}

/// Written aside under an unpredictable name and renamed over: a Python
/// starting at that moment never imports half a file.
fn replace(dir: &DirFd, name: &OsStr, p: &Payload) -> io::Result<()> {
    let tmp = OsString::from(format!(".{}.{}.tmp", p.name, random_hex()));
    let result = dir.create_new(&tmp, p.mode).and_then(|mut f| f.write_all(p.text.as_bytes()));
    let result = result.and_then(|()| dir.rename(&tmp, name));
    if result.is_err() {
        let _ = dir.unlink(&tmp);
    }
    result
}

/// A file the user named for gpuscope to write (`record --force` and
/// `--append`, `run --report`), opened once, and only as a regular file of
/// this user's: never through a link planted at the path
/// (a root cron job's `record --force /tmp/x` would otherwise wipe any file
/// of the system), never another user's file, and never blocking: opening
/// a FIFO another user planted in a shared directory would wait for a
/// reader forever, before any `--timeout` runs. Nothing is truncated until
/// the checks pass.
pub fn open_ours(path: &Path, options: &mut OpenOptions) -> Result<File, String> {
    let file = options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC).open(path).map_err(|e| {
        match e.raw_os_error() {
            Some(libc::ELOOP) => "it is a symbolic link, and gpuscope does not write through links".to_string(),
            // O_WRONLY | O_NONBLOCK on a FIFO with no reader.
            Some(libc::ENXIO) => "it is a FIFO, not a regular file".to_string(),
            _ => e.to_string(),
        }
    })?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.file_type().is_file() {
        return Err("it is not a regular file (a FIFO, a device or a socket)".into());
    }
    let me = current_uid();
    if meta.uid() != me {
        return Err(format!("it belongs to uid {}, not to this user (uid {me})", meta.uid()));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    const A: Payload =
        Payload { name: "a.py", text: "\"\"\"gpuscope test payload v2\n", marker: "\"\"\"gpuscope test", mode: 0o600 };

    fn root() -> (tempfile::TempDir, DirFd) {
        let t = tempfile::tempdir().unwrap();
        let d = DirFd::open(t.path()).unwrap();
        (t, d)
    }

    #[test]
    fn a_new_directory_is_private() {
        let (t, root) = root();
        private_child(&root, OsStr::new("new")).unwrap();
        let mode = std::fs::metadata(t.path().join("new")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // Found again: accepted as it is.
        private_child(&root, OsStr::new("new")).unwrap();
    }

    #[test]
    fn a_found_directory_is_judged_never_changed() {
        let (t, root) = root();
        let open = t.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = private_child(&root, OsStr::new("open")).unwrap_err();
        assert!(e.contains("mode 755"), "{e}");
        assert_eq!(std::fs::metadata(&open).unwrap().permissions().mode() & 0o777, 0o755, "left as it was");
    }

    #[test]
    fn only_files_gpuscope_wrote_are_replaced() {
        let (t, root) = root();
        write_ours(&root, &A).unwrap();
        assert_eq!(std::fs::read_to_string(t.path().join("a.py")).unwrap(), A.text);
        // An older copy of ours is updated.
        std::fs::write(t.path().join("a.py"), "\"\"\"gpuscope test payload v1\n").unwrap();
        write_ours(&root, &A).unwrap();
        assert_eq!(std::fs::read_to_string(t.path().join("a.py")).unwrap(), A.text);
        // Someone else's file of that name is not.
        std::fs::write(t.path().join("a.py"), "print('mine')\n").unwrap();
        let e = write_ours(&root, &A).unwrap_err();
        assert!(e.contains("not written by gpuscope"), "{e}");
        assert_eq!(std::fs::read_to_string(t.path().join("a.py")).unwrap(), "print('mine')\n");
        // Nor a link, nor what it points to.
        std::fs::remove_file(t.path().join("a.py")).unwrap();
        let target = t.path().join("target");
        std::fs::write(&target, "\"\"\"gpuscope test payload v1\n").unwrap();
        std::os::unix::fs::symlink(&target, t.path().join("a.py")).unwrap();
        let e = write_ours(&root, &A).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "\"\"\"gpuscope test payload v1\n");
        let left: Vec<_> = std::fs::read_dir(t.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 2, "no temporary file left behind: {left:?}");
    }

    #[test]
    fn a_shared_root_must_be_sticky() {
        let t = tempfile::tempdir().unwrap();
        let open = t.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(shared_root(DirFd::open(&open).unwrap()).is_err());
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(shared_root(DirFd::open(&open).unwrap()).is_ok());
    }
}
