//! `gpuscope run` stays the job's parent, so that it can report when the
//! job ends: it starts the job, passes on the signals meant for the job,
//! and ends with the job's own status.
//!
//! - The job stays in gpuscope's process group (no `setsid`, no
//!   `setpgid`): the terminal's job control (Ctrl-C, Ctrl-Z, `fg`) reaches
//!   both as it reached the job alone when `run` replaced itself with it.
//! - SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are blocked in
//!   every gpuscope thread before the job starts (threads started later
//!   inherit the mask; the child unblocks them before it execs, as a
//!   child's mask is its parent's), and one
//!   thread takes them with `sigwaitinfo` and sends each to the job. A
//!   signal the kernel sent to the whole foreground group (Ctrl-C, Ctrl-\,
//!   a terminal hang-up: `si_code` SI_KERNEL, from the tty's `isig` through
//!   `kill_pgrp` with `SEND_SIG_PRIV`) has reached the job already, and is
//!   not sent twice: a second SIGINT would interrupt the job's own clean-up
//!   of the first. One from `kill` (Slurm's, the kubelet's) is sent on.
//! - The job is waited for without reaping it (`waitid` with `WNOWAIT`),
//!   signals stop being forwarded, and only then is it reaped: its PID
//!   cannot be another process's when a late signal is sent to it.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex, PoisonError};

/// The signals a job is sent through gpuscope.
pub const FORWARDED: [libc::c_int; 6] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGUSR1, libc::SIGUSR2];

/// How the job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Exited(i32),
    Signalled(i32),
}

impl Ended {
    /// The status gpuscope ends with: the job's own, and a death by signal
    /// N as the shells report one, 128 + N. (Re-raising the signal on
    /// gpuscope would be the other way; a SIGQUIT or SIGSEGV would then
    /// dump gpuscope's core, not the job's.)
    pub fn exit_status(self) -> u8 {
        match self {
            Self::Exited(code) => (code & 0xff) as u8,
            Self::Signalled(sig) => 128u8.saturating_add(u8::try_from(sig).unwrap_or(127)),
        }
    }
}

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set it is given; sigaddset adds
    // valid signal numbers to it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in FORWARDED {
            libc::sigaddset(&mut set, sig);
        }
        set
    }
}

/// Starts `cmd` as gpuscope's child with the forwarded signals held for
/// it, and a thread that sends them on. Call before any other thread
/// starts, so that every thread inherits the mask.
pub fn spawn(cmd: &mut Command) -> io::Result<Job> {
    let set = signal_set();
    // SAFETY: blocks signals in the calling thread; `set` is initialised.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    // SAFETY: the closure runs in the child between fork and exec, and
    // calls only pthread_sigmask, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || match libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) {
            0 => Ok(()),
            rc => Err(io::Error::from_raw_os_error(rc)),
        });
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            // Nothing to forward to: as before, for the error's report.
            // SAFETY: as above.
            unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
            return Err(e);
        }
    };
    let pid = child.id();
    let reaped = Arc::new(Mutex::new(false));
    let gate = Arc::clone(&reaped);
    std::thread::Builder::new().name("gpuscope-signals".into()).spawn(move || forward(pid, &set, &gate))?;
    Ok(Job { child, reaped })
}

fn forward(pid: u32, set: &libc::sigset_t, reaped: &Mutex<bool>) {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return };
    loop {
        // SAFETY: siginfo_t is plain data the kernel fills.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is initialised and `info` writable.
        let sig = unsafe { libc::sigwaitinfo(set, &mut info) };
        if sig < 0 {
            continue;
        }
        let done = reaped.lock().unwrap_or_else(PoisonError::into_inner);
        if *done {
            return;
        }
        if info.si_code != libc::SI_KERNEL {
            // SAFETY: `pid` is our child, not reaped yet (`done` is false
            // while this lock is held), so it names no other process.
            unsafe { libc::kill(pid, sig) };
        }
    }
}

/// The job while it runs.
pub struct Job {
    child: Child,
    reaped: Arc<Mutex<bool>>,
}

impl Job {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the job to end, then stops forwarding and reaps it.
    pub fn wait(mut self) -> io::Result<Ended> {
        let pid = libc::id_t::from(self.child.id());
        loop {
            // SAFETY: siginfo_t is plain data; waitid fills it for our child.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: as above; WNOWAIT leaves the child waitable.
            let rc = unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
            if rc == 0 {
                break;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        *self.reaped.lock().unwrap_or_else(PoisonError::into_inner) = true;
        let status = self.child.wait()?;
        use std::os::unix::process::ExitStatusExt;
        Ok(match (status.code(), status.signal()) {
            (Some(code), _) => Ended::Exited(code),
            (None, Some(sig)) => Ended::Signalled(sig),
            (None, None) => Ended::Exited(1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_death_by_signal_ends_as_the_shells_report_it() {
        assert_eq!(Ended::Exited(0).exit_status(), 0);
        assert_eq!(Ended::Exited(3).exit_status(), 3);
        assert_eq!(Ended::Exited(256 + 7).exit_status(), 7, "only the low byte reaches a parent");
        assert_eq!(Ended::Signalled(libc::SIGTERM).exit_status(), 143);
        assert_eq!(Ended::Signalled(libc::SIGINT).exit_status(), 130);
    }
}
