//! Reading the files `serve` is given (certificate, key, token). What was
//! opened is what is checked (its `fstat`, not the path's): a regular file,
//! read with a bound; a secret must be owned by gpuscope's user (or root)
//! and be out of reach of group and others, as ssh demands of a key. A
//! link is followed on purpose (certificate tools publish through links);
//! the checks apply to where it leads.

use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::util::current_uid;

/// A certificate chain or a key is a few KiB; anything much larger is not one.
const MAX_BYTES: u64 = 1024 * 1024;

/// A file that cannot serve: the flag that named it, the path, and why.
#[derive(Debug, thiserror::Error)]
#[error("{flag} {}: {problem}", path.display())]
pub struct FileError {
    pub flag: &'static str,
    pub path: PathBuf,
    pub problem: String,
}

impl FileError {
    pub fn new(flag: &'static str, path: &Path, problem: impl Into<String>) -> Self {
        Self { flag, path: path.to_path_buf(), problem: problem.into() }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Public,
    Secret,
}

/// The file's bytes, once what was opened passed the checks for `kind`.
pub fn read(flag: &'static str, path: &Path, kind: Kind) -> Result<Vec<u8>, FileError> {
    let fail = |problem: String| FileError::new(flag, path, problem);
    // Non-blocking: a FIFO put in the file's place must not hang start-up.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| fail(format!("cannot open it: {e}")))?;
    let meta = file.metadata().map_err(|e| fail(format!("cannot stat it: {e}")))?;
    check(&meta, kind).map_err(fail)?;
    read_bounded(file).map_err(fail)
}

fn check(meta: &Metadata, kind: Kind) -> Result<(), String> {
    if !meta.file_type().is_file() {
        return Err("not a regular file".into());
    }
    if kind == Kind::Public {
        return Ok(());
    }
    let (owner, me) = (meta.uid(), current_uid());
    if owner != me && owner != 0 {
        return Err(format!("owned by uid {owner}, neither gpuscope's user (uid {me}) nor root: a secret must be"));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!("group or others may access it (mode {mode:04o}); a secret must be private: chmod 600 it"));
    }
    Ok(())
}

fn read_bounded(file: File) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(format!("larger than {} KiB: not a certificate, key or token", MAX_BYTES / 1024));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn file_with_mode(dir: &Path, mode: u32) -> PathBuf {
        let path = dir.join(format!("f{mode:o}"));
        std::fs::write(&path, b"x").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_secret_must_be_private_and_a_public_file_need_not() {
        let dir = tempfile::tempdir().unwrap();
        let open = file_with_mode(dir.path(), 0o644);
        let private = file_with_mode(dir.path(), 0o600);
        assert_eq!(read("--x", &open, Kind::Public).unwrap(), b"x");
        assert_eq!(read("--x", &private, Kind::Secret).unwrap(), b"x");
        let refused = read("--token-file", &open, Kind::Secret).unwrap_err().to_string();
        assert!(refused.starts_with("--token-file ") && refused.contains("mode 0644"), "{refused}");
    }

    #[test]
    fn directories_missing_files_and_huge_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let not_file = read("--x", dir.path(), Kind::Public).unwrap_err().to_string();
        assert!(not_file.ends_with("not a regular file"), "{not_file}");
        let missing = read("--x", &dir.path().join("nope"), Kind::Public).unwrap_err().to_string();
        assert!(missing.contains("cannot open it"), "{missing}");
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'a'; MAX_BYTES as usize + 1]).unwrap();
        assert!(read("--x", &big, Kind::Public).unwrap_err().problem.starts_with("larger than"));
    }
}
