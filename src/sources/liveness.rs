//! "Is process PID, started at tick T, still there?" asked of every probed
//! process on every tick. A process is held by a descriptor bound to it, so
//! the answer never comes from a stranger that has since been given the
//! PID:
//!
//! - a pidfd (`pidfd_open(2)`, Linux 5.3), which polls readable once the
//!   process has exited. One `poll(2)` over all of them (`Exited::poll`)
//!   answers for hundreds of processes, where a file read each cost a
//!   system call apiece (128 of them were a sixth of the probe reader's
//!   time at 128 probed ranks);
//! - else (an older kernel, a seccomp profile that refuses it, a `/proc`
//!   that is not this process's own view) its `/proc/PID/comm`, a cheap
//!   file whose reads fail once the process is reaped.
//!
//! Either way a zombie not yet reaped still counts as there, as it does in
//! `/proc`: it is asked its `stat` once its pidfd has fired.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::procstat;
use crate::hashing::IntSet;

#[derive(Debug)]
pub struct Held {
    pid: u32,
    watch: Watch,
    pub start_ticks: u64,
}

#[derive(Debug)]
enum Watch {
    Pidfd(OwnedFd),
    /// `/proc/PID/comm`: a third of the kernel's time of a `stat` read (no
    /// fifty numbers to format).
    Comm(File),
}

/// The held processes whose pidfds had fired when last polled: exited,
/// reaped or not. Those held through `comm` are never in it.
#[derive(Debug, Default)]
pub struct Exited(IntSet<u32>);

impl Exited {
    /// One `poll(2)` with no timeout over the pidfds of `held`.
    pub fn poll<'a>(held: impl IntoIterator<Item = &'a Held>) -> Self {
        let (pids, mut fds): (Vec<u32>, Vec<libc::pollfd>) = held
            .into_iter()
            .filter_map(|h| match &h.watch {
                Watch::Pidfd(fd) => {
                    Some((h.pid, libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 }))
                }
                Watch::Comm(_) => None,
            })
            .unzip();
        if fds.is_empty() {
            return Self::default();
        }
        let n = libc::nfds_t::try_from(fds.len()).unwrap_or(libc::nfds_t::MAX);
        // SAFETY: `fds` is a valid array of `n` pollfd structs, each naming
        // a descriptor `held` owns for the length of the call.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), n, 0) };
        if ready < 0 {
            // Cannot tell (EINTR, ENOMEM): every pidfd is asked again one by
            // one, through `stat`, as if it had fired.
            return Self(pids.into_iter().collect());
        }
        Self(pids.into_iter().zip(&fds).filter(|(_, p)| p.revents != 0).map(|(pid, _)| pid).collect())
    }
}

impl Held {
    /// `Ok(None)`: no such process. `Err`: it could not be told (out of
    /// descriptors, say), which must never be taken for "gone".
    /// `own_view`: `proc_root` numbers processes as this process does, so
    /// that a PID means the same to `pidfd_open`.
    pub fn open(proc_root: &Path, pid: u32, own_view: bool) -> io::Result<Option<Self>> {
        let watch = match own_view.then(|| pidfd_open(pid)) {
            Some(Ok(fd)) => Watch::Pidfd(fd),
            Some(Err(e)) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(None),
            _ => match File::open(procstat::pid_file(proc_root, pid, "comm")) {
                Ok(comm) => Watch::Comm(comm),
                Err(e) if procstat::gone(&e) => return Ok(None),
                Err(e) => return Err(e),
            },
        };
        let Some(start_ticks) = procstat::read_checked(proc_root, pid)?.map(|s| s.start_ticks) else {
            return Ok(None);
        };
        let held = Self { pid, watch, start_ticks };
        // Still there after the start time was read: the time was this
        // process's, not a successor's under the same PID.
        Ok(held.alive(proc_root, None).then_some(held))
    }

    /// Whether the process it was opened for still exists (a zombie not
    /// yet reaped does). `exited`: this tick's poll, or `None` to ask now.
    pub fn alive(&self, proc_root: &Path, exited: Option<&Exited>) -> bool {
        match &self.watch {
            Watch::Pidfd(_) => {
                let fired = match exited {
                    Some(polled) => polled.0.contains(&self.pid),
                    None => Exited::poll([self]).0.contains(&self.pid),
                };
                !fired || self.unreaped(proc_root)
            }
            // A live one's name ends in a newline, so it is never empty.
            Watch::Comm(comm) => comm.read_at(&mut [0; 32], 0).is_ok_and(|n| n > 0),
        }
    }

    /// Exited, and asked whether it is a zombie not yet reaped: its PID
    /// cannot have gone to another process before then, so a `stat` with
    /// its start time is its own.
    fn unreaped(&self, proc_root: &Path) -> bool {
        procstat::read_checked(proc_root, self.pid).ok().flatten().is_some_and(|s| s.start_ticks == self.start_ticks)
    }
}

/// Whether the PIDs under `proc_root` are the ones `pidfd_open` takes: the
/// kernel's own procfs (not a copy, nor a test's stand-in tree), numbering
/// processes as this process does.
pub fn pidfds_serve(proc_root: &Path) -> bool {
    let Ok(path) = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(proc_root.as_os_str())) else {
        return false;
    };
    // SAFETY: all-zero is a valid `statfs`, written below.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid out-pointer.
    let procfs = unsafe { libc::statfs(path.as_ptr(), &mut fs) } == 0 && fs.f_type == libc::PROC_SUPER_MAGIC;
    procfs && procstat::is_own_view(proc_root)
}

fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: pidfd_open takes a PID and flags and returns a new descriptor
    // or -1; no memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: `fd` was just returned by the kernel and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn proc() -> &'static Path {
        Path::new("/proc")
    }

    /// Both ways of holding a process answer the same at each stage of its
    /// end: running, a zombie not yet reaped, reaped.
    #[test]
    fn a_held_process_is_there_until_reaped_either_way() {
        for own_view in [true, false] {
            let mut child = Command::new("sleep").arg("30").spawn().unwrap();
            let _ender = procstat::Ender(i32::try_from(child.id()).unwrap());
            let held = Held::open(proc(), child.id(), own_view).unwrap().unwrap();
            assert_eq!(matches!(held.watch, Watch::Pidfd(_)), own_view, "{held:?}");
            assert_eq!(Some(held.start_ticks), procstat::start_ticks(proc(), child.id()));
            let polled = Exited::poll([&held]);
            assert!(held.alive(proc(), Some(&polled)) && held.alive(proc(), None));
            assert!(polled.0.is_empty());

            // SAFETY: a signal to the child this test started.
            unsafe { libc::kill(i32::try_from(child.id()).unwrap(), libc::SIGKILL) };
            while procstat::read(proc(), child.id()).is_some_and(|s| !s.exited()) {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            let polled = Exited::poll([&held]);
            assert_eq!(polled.0.contains(&child.id()), own_view, "a zombie's pidfd has fired");
            assert!(held.alive(proc(), Some(&polled)), "a zombie is still there");
            assert!(held.alive(proc(), None));

            child.wait().unwrap();
            let polled = Exited::poll([&held]);
            assert!(!held.alive(proc(), Some(&polled)), "reaped, whoever has the PID now");
            assert!(!held.alive(proc(), None));
            let again = Held::open(proc(), child.id(), own_view).unwrap();
            assert!(again.is_none_or(|h| h.start_ticks != held.start_ticks));
        }
    }

    #[test]
    fn only_the_kernels_own_proc_serves_pidfds() {
        assert!(pidfds_serve(proc()));
        let copy = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(std::process::id().to_string(), copy.path().join("self")).unwrap();
        assert!(
            procstat::is_own_view(copy.path()) && !pidfds_serve(copy.path()),
            "a stand-in tree is not the kernel's"
        );
        assert!(!pidfds_serve(Path::new("/nonexistent")));
    }

    #[test]
    fn no_such_process_is_none_and_a_missing_proc_is_none() {
        assert!(Held::open(proc(), u32::MAX - 7, true).unwrap().is_none());
        assert!(Held::open(proc(), u32::MAX - 7, false).unwrap().is_none());
        let empty = tempfile::tempdir().unwrap();
        assert!(Held::open(empty.path(), std::process::id(), false).unwrap().is_none());
    }

    /// A start time that cannot be read for another reason than the
    /// process being gone (out of descriptors, say; here a `stat` that is a
    /// directory) is an error, which the probe reader takes for "cannot
    /// tell" and so removes nothing.
    #[test]
    fn an_unreadable_start_time_is_an_error_not_gone() {
        let me = std::process::id();
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(me.to_string());
        std::fs::create_dir_all(dir.join("stat")).unwrap();
        std::fs::write(dir.join("comm"), "python\n").unwrap();
        let e = Held::open(root.path(), me, false).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EISDIR), "{e}");
        std::fs::remove_dir(dir.join("stat")).unwrap();
        assert!(Held::open(root.path(), me, false).unwrap().is_none(), "no stat at all: gone");
    }

    /// Hundreds of pidfds answer in one call, and only the ended ones fire.
    #[test]
    fn one_poll_answers_for_many() {
        let mut children: Vec<_> = (0..40).map(|_| Command::new("sleep").arg("30").spawn().unwrap()).collect();
        let _enders: Vec<_> = children.iter().map(|c| procstat::Ender(i32::try_from(c.id()).unwrap())).collect();
        let held: Vec<Held> = children.iter().map(|c| Held::open(proc(), c.id(), true).unwrap().unwrap()).collect();
        for c in children.iter_mut().step_by(3) {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        let polled = Exited::poll(&held);
        for (i, h) in held.iter().enumerate() {
            assert_eq!(polled.0.contains(&h.pid), i % 3 == 0, "child {i}");
            assert_eq!(h.alive(proc(), Some(&polled)), i % 3 != 0, "child {i}");
        }
    }
}
