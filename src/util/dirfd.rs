//! Directory-relative file operations that never follow a symbolic link
//! below the directory they start from. Every directory is judged by what
//! was opened (`fstat` on the descriptor), never by a name looked up a
//! moment earlier, so a link or directory swapped in between is caught.
//!
//! The calls go through rustix, which on Linux makes the system calls
//! itself: no glibc symbol newer than the release builds' 2.17 is linked
//! (`packaging/check.py` reads the symbol versions).

use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::hash::{BuildHasher, RandomState};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, StatxFlags};
use rustix::io::Errno;

/// An open directory and the path it was reached by (for messages and for
/// the caller's own checks of that path).
#[derive(Debug)]
pub struct DirFd {
    file: File,
    pub path: PathBuf,
}

/// The few figures of a file `stat_nofollow` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    pub ino: u64,
    pub len: u64,
    /// Modification time in nanoseconds since the epoch.
    pub mtime_ns: i64,
    pub uid: u32,
    /// A regular file (not a link, directory, FIFO or device).
    pub is_file: bool,
}

/// A name of one component, checked before any call: a name with a `/`
/// would reach outside the directory. rustix copies a name this short
/// (at most `NAME_MAX`, 255 bytes) to the stack with its NUL: the probe
/// reader opens or checks every probe file by name on every tick.
fn plain_name(name: &OsStr) -> io::Result<&OsStr> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.contains(&b'/') {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a plain file name"));
    }
    if bytes.contains(&0) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "NUL in a file name"));
    }
    if bytes.len() > 255 {
        return Err(Errno::NAMETOOLONG.into());
    }
    Ok(name)
}

fn mode(mode: u32) -> Mode {
    Mode::from_bits_truncate(mode)
}

impl DirFd {
    /// Opens a directory the user named (an environment variable, a
    /// Python's site directory): links in that path are the user's own
    /// choice and are followed; the caller judges what was opened.
    pub fn open(path: &Path) -> io::Result<Self> {
        let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        Ok(Self { file: File::from(fd), path: path.to_path_buf() })
    }

    /// Opens a directory whose last component must not be a link (the
    /// probe directory, already judged by its path): what is opened is
    /// then judged again through the descriptor.
    pub fn open_nofollow(path: &Path) -> io::Result<Self> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::open(path, flags, Mode::empty())?;
        Ok(Self { file: File::from(fd), path: path.to_path_buf() })
    }

    pub fn metadata(&self) -> io::Result<Metadata> {
        self.file.metadata()
    }

    /// `chmod` through the descriptor: only for a directory this process
    /// has just created, never for one it found.
    pub fn set_mode(&self, mode: u32) -> io::Result<()> {
        self.file.set_permissions(std::fs::Permissions::from_mode(mode))
    }

    /// `Ok(true)` when this call created it, `Ok(false)` when something of
    /// that name already existed (to be judged by the caller).
    pub fn mkdir(&self, name: &OsStr, mode: u32) -> io::Result<bool> {
        match rustix::fs::mkdirat(&self.file, plain_name(name)?, self::mode(mode)) {
            Ok(()) => Ok(true),
            Err(Errno::EXIST) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    fn openat(&self, name: &OsStr, flags: OFlags, mode: u32) -> io::Result<File> {
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        Ok(File::from(rustix::fs::openat(&self.file, plain_name(name)?, flags, self::mode(mode))?))
    }

    /// A directory inside this one; a symbolic link there fails (ENOTDIR
    /// or ELOOP).
    pub fn open_dir(&self, name: &OsStr) -> io::Result<Self> {
        let file = self.openat(name, OFlags::RDONLY | OFlags::DIRECTORY, 0)?;
        Ok(Self { file, path: self.path.join(name) })
    }

    /// The entries of the directory this descriptor holds, wherever its
    /// path leads now: listed through `/proc/self/fd`, which names the
    /// open directory itself, so one swapped in at the path after it was
    /// opened and judged is never listed; through the path only where
    /// `/proc` is not this process's.
    pub fn read_dir(&self) -> io::Result<std::fs::ReadDir> {
        match std::fs::read_dir(format!("/proc/self/fd/{}", self.file.as_raw_fd())) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::read_dir(&self.path),
            listed => listed,
        }
    }

    /// A file inside this one, for reading; neither a link nor a FIFO can
    /// make this follow or block. Read without touching its access time
    /// where the file is this user's (`O_NOATIME` is refused, EPERM, on
    /// anyone else's): a probe file is a new inode each second, and on a
    /// disk file system each first read of one would otherwise dirty the
    /// inode for the journal to write out.
    pub fn open_file(&self, name: &OsStr) -> io::Result<File> {
        let flags = OFlags::RDONLY | OFlags::NONBLOCK;
        match self.openat(name, flags | OFlags::NOATIME, 0) {
            Err(e) if e.raw_os_error() == Some(Errno::PERM.raw_os_error()) => self.openat(name, flags, 0),
            opened => opened,
        }
    }

    /// A new file; fails if anything of that name exists.
    pub fn create_new(&self, name: &OsStr, mode: u32) -> io::Result<File> {
        self.openat(name, OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL, mode)
    }

    pub fn rename(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        Ok(rustix::fs::renameat(&self.file, plain_name(from)?, &self.file, plain_name(to)?)?)
    }

    pub fn unlink(&self, name: &OsStr) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(&self.file, plain_name(name)?, AtFlags::empty())?)
    }

    /// What `name` in this directory is, the name itself not followed
    /// should it be a link: one system call where opening, `fstat` and
    /// closing take three, for callers that only ask whether a file they
    /// opened before is still the same version. `statx` (Linux 4.11);
    /// `Unsupported` where the kernel lacks it or leaves out a field asked
    /// for.
    pub fn stat_nofollow(&self, name: &OsStr) -> io::Result<FileStat> {
        let flags = AtFlags::SYMLINK_NOFOLLOW | AtFlags::STATX_SYNC_AS_STAT;
        let wanted = StatxFlags::TYPE
            | StatxFlags::MODE
            | StatxFlags::UID
            | StatxFlags::INO
            | StatxFlags::SIZE
            | StatxFlags::MTIME;
        let st = match rustix::fs::statx(&self.file, plain_name(name)?, flags, wanted) {
            Ok(st) => st,
            Err(Errno::NOSYS) => return Err(io::ErrorKind::Unsupported.into()),
            Err(e) => return Err(e.into()),
        };
        if st.stx_mask & wanted.bits() != wanted.bits() {
            return Err(io::ErrorKind::Unsupported.into());
        }
        Ok(FileStat {
            ino: st.stx_ino,
            len: st.stx_size,
            mtime_ns: st.stx_mtime.tv_sec.saturating_mul(1_000_000_000).saturating_add(i64::from(st.stx_mtime.tv_nsec)),
            uid: st.stx_uid,
            is_file: FileType::from_raw_mode(u32::from(st.stx_mode)) == FileType::RegularFile,
        })
    }

    /// The same directory as `other` (device and inode)?
    pub fn is(&self, other: &Metadata) -> bool {
        self.metadata().is_ok_and(|m| m.dev() == other.dev() && m.ino() == other.ino())
    }
}

/// Eight random bytes as hex, for names nobody can predict.
///
/// std's `RandomState` draws its keys from the kernel's random source, through
/// std's own weakly linked `getrandom` (a raw system call where glibc lacks
/// it); calling `libc::getrandom` here would need glibc 2.25, above the 2.17
/// the release builds promise (`packaging/check.py` reads the symbol
/// versions). Each `RandomState::new()` has different keys, so two names in
/// one process differ as well.
pub fn random_hex() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let value = RandomState::new().hash_one((nanos, std::process::id()));
    format!("{value:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_below_the_start_are_never_followed() {
        let root = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), root.path().join("link")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.path().join("file-link")).unwrap();
        assert!(DirFd::open_nofollow(&root.path().join("link")).is_err());
        let dir = DirFd::open(root.path()).unwrap();
        let e = dir.open_dir(OsStr::new("link")).unwrap_err().raw_os_error();
        assert!(matches!(e, Some(libc::ELOOP | libc::ENOTDIR)), "{e:?}");
        assert_eq!(dir.open_file(OsStr::new("file-link")).unwrap_err().raw_os_error(), Some(libc::ELOOP));
        assert!(dir.create_new(OsStr::new("file-link"), 0o600).is_err(), "O_EXCL refuses an existing link");
        assert!(!dir.mkdir(OsStr::new("link"), 0o700).unwrap(), "an existing name is reported, not replaced");
        assert!(dir.open_dir(OsStr::new("../x")).is_err(), "names only, no paths");
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_stat_describes_the_name_itself_and_never_a_link_target() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("f"), b"12345").unwrap();
        std::os::unix::fs::symlink(root.path().join("f"), root.path().join("link")).unwrap();
        let dir = DirFd::open(root.path()).unwrap();
        let f = dir.stat_nofollow(OsStr::new("f")).unwrap();
        let m = std::fs::metadata(root.path().join("f")).unwrap();
        let mtime_ns = m.mtime() * 1_000_000_000 + m.mtime_nsec();
        assert_eq!(f, FileStat { ino: m.ino(), len: 5, mtime_ns, uid: m.uid(), is_file: true });
        let link = dir.stat_nofollow(OsStr::new("link")).unwrap();
        assert!(!link.is_file && link.ino != f.ino, "the link, not its target: {link:?}");
        assert!(!dir.stat_nofollow(OsStr::new(".")).unwrap().is_file);
        assert_eq!(dir.stat_nofollow(OsStr::new("gone")).unwrap_err().kind(), io::ErrorKind::NotFound);
        assert!(dir.stat_nofollow(OsStr::new("../f")).is_err(), "names only, no paths");
    }

    #[test]
    fn created_files_and_renames_stay_inside() {
        let root = tempfile::tempdir().unwrap();
        let dir = DirFd::open(root.path()).unwrap();
        assert!(dir.mkdir(OsStr::new("sub"), 0o700).unwrap());
        let sub = dir.open_dir(OsStr::new("sub")).unwrap();
        io::Write::write_all(&mut sub.create_new(OsStr::new("a"), 0o600).unwrap(), b"x").unwrap();
        sub.rename(OsStr::new("a"), OsStr::new("b")).unwrap();
        assert_eq!(std::fs::read(root.path().join("sub/b")).unwrap(), b"x");
        sub.unlink(OsStr::new("b")).unwrap();
        assert!(sub.is(&std::fs::metadata(root.path().join("sub")).unwrap()));
        assert_ne!(random_hex(), random_hex());
    }

    #[test]
    fn names_up_to_the_kernel_s_longest_and_no_further() {
        let root = tempfile::tempdir().unwrap();
        let dir = DirFd::open(root.path()).unwrap();
        let longest = "n".repeat(255);
        io::Write::write_all(&mut dir.create_new(OsStr::new(&longest), 0o600).unwrap(), b"x").unwrap();
        assert_eq!(dir.stat_nofollow(OsStr::new(&longest)).unwrap().len, 1);
        let too_long = dir.open_file(OsStr::new(&"n".repeat(256))).unwrap_err();
        assert_eq!(too_long.raw_os_error(), Some(libc::ENAMETOOLONG));
        assert_eq!(dir.open_file(OsStr::new("a\0b")).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(dir.unlink(OsStr::new("")).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        dir.unlink(OsStr::new(&longest)).unwrap();
    }

    #[test]
    fn the_listing_is_of_the_directory_opened_not_of_what_its_path_names_now() {
        let root = tempfile::tempdir().unwrap();
        let (path, moved) = (root.path().join("probes"), root.path().join("moved"));
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("mine"), b"").unwrap();
        let dir = DirFd::open(&path).unwrap();
        std::fs::rename(&path, &moved).unwrap();
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("planted"), b"").unwrap();
        let names: Vec<_> = dir.read_dir().unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["mine"]);
    }

    /// A file read through `open_file` keeps its access time, where a
    /// plain read on the same file system (relatime: the access time was
    /// older than the change) moves it: no inode dirtied per probe version.
    #[test]
    fn reading_a_file_of_ones_own_leaves_its_access_time() {
        use std::io::Read;
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("probe.json");
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        let atime = || std::fs::metadata(&path).unwrap().accessed().unwrap();
        let age = |file: &File| file.set_times(std::fs::FileTimes::new().set_accessed(hour_ago)).unwrap();
        std::fs::write(&path, b"{}").unwrap();
        let dir = DirFd::open(root.path()).unwrap();

        age(&File::options().write(true).open(&path).unwrap());
        let mut text = String::new();
        dir.open_file(OsStr::new("probe.json")).unwrap().read_to_string(&mut text).unwrap();
        assert_eq!((text.as_str(), atime()), ("{}", hour_ago));

        // The control: a plain read moves it, unless the mount keeps no
        // access times at all (then there is nothing to tell apart).
        let c = std::ffi::CString::new(root.path().as_os_str().as_bytes()).unwrap();
        // SAFETY: all-zero is a valid `statvfs`, written below.
        let mut fs: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: a NUL-terminated path and a valid out-pointer.
        assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut fs) }, 0);
        std::fs::read(&path).unwrap();
        if fs.f_flag & libc::ST_NOATIME == 0 {
            assert!(atime() > hour_ago, "a plain read moves it");
        }
    }
}
