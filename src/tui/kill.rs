//! Signals to GPU processes. Offered only where the kernel would allow it
//! anyway (the same user, or root), and sent only to the process that was
//! confirmed: the PID *and* its start time must still match, so a PID
//! recycled while the dialog was open is never hit.

use std::path::Path;

use crate::sources::procstat;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Term,
    Kill,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Self::Term => "SIGTERM",
            Self::Kill => "SIGKILL",
        }
    }

    fn number(self) -> libc::c_int {
        match self {
            Self::Term => libc::SIGTERM,
            Self::Kill => libc::SIGKILL,
        }
    }
}

/// A process as it was when the user was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub pid: u32,
    pub start_ticks: u64,
}

/// The process behind `pid`, if this user may signal it.
pub fn target(pid: u32) -> Result<Target, String> {
    target_in(Path::new("/proc"), pid)
}

fn target_in(proc_root: &Path, pid: u32) -> Result<Target, String> {
    // 0 and negative PIDs address process groups, 1 is init: never.
    if pid <= 1 || libc::pid_t::try_from(pid).is_err() {
        return Err(format!("PID {pid} is not a process gpuscope will signal"));
    }
    let gone = || format!("PID {pid} is not visible from here (exited, or in another PID namespace)");
    let uid = procstat::real_uid(proc_root, pid).ok_or_else(gone)?;
    let start_ticks = procstat::start_ticks(proc_root, pid).ok_or_else(gone)?;
    // SAFETY: getuid and geteuid cannot fail and touch no memory.
    let (me, effective) = unsafe { (libc::getuid(), libc::geteuid()) };
    if effective != 0 && uid != me && uid != effective {
        return Err(format!("PID {pid} belongs to uid {uid}: only its owner or root may signal it"));
    }
    Ok(Target { pid, start_ticks })
}

pub fn send(target: Target, signal: Signal) -> Result<(), String> {
    let pid = target.pid;
    match procstat::start_ticks(Path::new("/proc"), pid) {
        None => return Err(format!("PID {pid} has already exited; nothing sent")),
        Some(t) if t != target.start_ticks => {
            return Err(format!("PID {pid} is now another process; nothing sent"));
        }
        Some(_) => {}
    }
    let raw = libc::pid_t::try_from(pid).map_err(|_| format!("PID {pid} is out of range"))?;
    // SAFETY: kill takes plain integers; `raw` is a single positive PID
    // (checked in `target`), never a group or "every process".
    if unsafe { libc::kill(raw, signal.number()) } == 0 {
        Ok(())
    } else {
        Err(format!("{} to PID {pid} failed: {}", signal.name(), std::io::Error::last_os_error()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn refuses_init_groups_and_invisible_processes() {
        assert!(target(0).unwrap_err().contains("not a process gpuscope will signal"));
        assert!(target(1).unwrap_err().contains("not a process gpuscope will signal"));
        assert!(target(u32::MAX).is_err());
        assert!(target(u32::MAX / 2 - 7).unwrap_err().contains("not visible"));
    }

    #[test]
    fn refuses_another_users_process() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("4242");
        std::fs::create_dir(&dir).unwrap();
        // SAFETY: getuid cannot fail.
        let stranger = unsafe { libc::getuid() } + 1;
        std::fs::write(dir.join("status"), format!("Uid:\t{stranger}\t{stranger}\t{stranger}\t{stranger}\n")).unwrap();
        std::fs::write(dir.join("stat"), "4242 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 555 0 0").unwrap();
        // SAFETY: geteuid cannot fail.
        let root_user = unsafe { libc::geteuid() } == 0;
        match target_in(root.path(), 4242) {
            Ok(t) => assert!(root_user && t.start_ticks == 555),
            Err(e) => assert!(!root_user && e.contains(&format!("uid {stranger}")), "{e}"),
        }
    }

    #[test]
    fn signals_only_the_confirmed_process() {
        let mut child = Command::new("sleep").arg("30").stdin(Stdio::null()).spawn().unwrap();
        let t = target(child.id()).unwrap();
        let stale = Target { start_ticks: t.start_ticks + 1, ..t };
        assert!(send(stale, Signal::Term).unwrap_err().contains("another process"));
        send(t, Signal::Term).unwrap();
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        assert!(send(t, Signal::Kill).unwrap_err().contains("exited"));
    }
}
