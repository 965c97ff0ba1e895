//! Where probes write, and whether gpuscope may trust what it finds there.
//! The rules mirror the probe's own: a real directory (no symlink), owned
//! by this user, closed to group and others. Anything else could have been
//! planted by another user, so it is refused, not read.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::util::current_uid;

/// `GPUSCOPE_PROBE_DIR`, else `$XDG_RUNTIME_DIR/gpuscope/probes`, else
/// `/tmp/gpuscope-UID/probes`: the same order the probe uses. A literal
/// `/tmp`, not `$TMPDIR`: clusters often set a per-job `TMPDIR`, and the
/// probe and gpuscope must meet whatever their environments say.
pub fn default_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("GPUSCOPE_PROBE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let uid = current_uid();
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from)
        && runtime.is_absolute()
        && std::fs::metadata(&runtime).is_ok_and(|m| m.is_dir() && m.uid() == uid)
    {
        return runtime.join("gpuscope").join("probes");
    }
    PathBuf::from("/tmp").join(format!("gpuscope-{uid}")).join("probes")
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeDir {
    pub path: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirError {
    #[error("{0} is a symbolic link; refusing to read probe data through it")]
    Symlink(PathBuf),
    #[error("{0} is not a directory")]
    NotDir(PathBuf),
    #[error("{path} belongs to uid {owner}, not to this user ({me}); refusing to trust it")]
    Owner { path: PathBuf, owner: u32, me: u32 },
    #[error("{path} is open to other users (mode {mode:o}); it must be 0700")]
    Mode { path: PathBuf, mode: u32 },
}

impl ProbeDir {
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }

    /// `Ok(false)` when the directory does not exist (no probe has run).
    pub fn check(&self) -> Result<bool, DirError> {
        let me = current_uid();
        let parent = self.path.parent().filter(|p| !p.as_os_str().is_empty());
        for dir in parent.into_iter().chain([self.path.as_path()]) {
            match std::fs::symlink_metadata(dir) {
                Err(_) => return Ok(false),
                Ok(m) => trusted(dir, &m, me)?,
            }
        }
        Ok(true)
    }
}

fn trusted(path: &Path, m: &std::fs::Metadata, me: u32) -> Result<(), DirError> {
    if m.file_type().is_symlink() {
        return Err(DirError::Symlink(path.to_path_buf()));
    }
    if !m.is_dir() {
        return Err(DirError::NotDir(path.to_path_buf()));
    }
    if m.uid() != me {
        return Err(DirError::Owner { path: path.to_path_buf(), owner: m.uid(), me });
    }
    if m.mode() & 0o077 != 0 {
        return Err(DirError::Mode { path: path.to_path_buf(), mode: m.mode() & 0o777 });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn private_dir(path: &Path) {
        std::fs::create_dir_all(path).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).unwrap();
    }

    #[test]
    fn private_directories_are_trusted_others_are_not() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().join("gpuscope");
        let probes = base.join("probes");
        assert_eq!(ProbeDir::new(probes.clone()).check(), Ok(false), "missing is not an error");
        private_dir(&base);
        private_dir(&probes);
        assert_eq!(ProbeDir::new(probes.clone()).check(), Ok(true));

        std::fs::set_permissions(&probes, std::fs::Permissions::from_mode(0o770)).unwrap();
        assert!(matches!(ProbeDir::new(probes.clone()).check(), Err(DirError::Mode { .. })));

        let link = base.join("link");
        std::os::unix::fs::symlink(&probes, &link).unwrap();
        assert!(matches!(ProbeDir::new(link).check(), Err(DirError::Symlink(_))));
    }
}
