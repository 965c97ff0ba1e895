//! Output errors in every mode that writes to stdout, as the README says:
//! a closed pipe is exit 0 (for `check`, its verdict) and nothing on
//! stderr; any other error (`/dev/full`) is exit 1 and one line on stderr.
//! Never a panic (exit 101).

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs::OpenOptions;
use std::process::{Command, Stdio};

use common::Sim;

/// Every mode that prints, with what it needs.
fn modes(sim: &Sim) -> Vec<Vec<String>> {
    let recording = sim.dir.path().join("rec.ndjson");
    let out = sim
        .gpuscope()
        .args(["record", recording.to_str().unwrap(), "--interval", "50ms", "--duration", "300ms"])
        .output()
        .unwrap();
    common::assert_success(&out);
    let rec = recording.to_str().unwrap().to_string();
    let v = |args: &[&str]| args.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        v(&["-1"]),
        v(&["--json"]),
        v(&["--json", "--watch", "--interval", "20ms"]),
        v(&["check", "--for", "0s"]),
        v(&["probe", "path"]),
        v(&["replay", &rec, "--json"]),
        v(&["--help"]),
        v(&["--version"]),
    ]
}

fn command(sim: &Sim, args: &[String]) -> Command {
    let mut cmd = sim.gpuscope();
    cmd.args(args).env("XDG_RUNTIME_DIR", sim.dir.path()).stderr(Stdio::piped());
    cmd
}

#[test]
fn a_full_output_is_exit_1_and_one_line() {
    let sim = Sim::new("[[gpu]]\n");
    for args in modes(&sim) {
        let full = OpenOptions::new().write(true).open("/dev/full").unwrap();
        let out = command(&sim, &args).stdout(full).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("No space left on device"), "{args:?}: {err}");
    }
}

#[test]
fn a_closed_pipe_is_a_quiet_normal_end() {
    let sim = Sim::new("[[gpu]]\n");
    for args in modes(&sim) {
        let mut child = command(&sim, &args).stdout(Stdio::piped()).spawn().unwrap();
        // The reader goes away before gpuscope writes a byte.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert_eq!(err, "", "{args:?}");
    }
}

#[test]
fn check_keeps_its_verdict_when_the_reader_is_gone() {
    let sim = Sim::new("[[gpu]]\nstate = \"lost\"\n");
    let mut child =
        command(&sim, &["check".into(), "--for".into(), "0s".into()]).stdout(Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "a lost GPU stays critical: {}", String::from_utf8_lossy(&out.stderr));
}

/// A stderr whose reader has gone (`2>&1 | head -1` after the first line)
/// does not turn a usage error (exit 2) or a hint into a panic (101), nor
/// does a full one.
#[test]
fn a_closed_or_full_stderr_changes_no_exit_status() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let sim = Sim::new("[[gpu]]\n");
    // `-c` is nvidia-smi's: gpuscope says so in a hint after clap's error.
    for args in [vec!["-c".to_string()], vec!["--no-such-flag".to_string()]] {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: pipe(2) just opened both; each is owned once.
        let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        drop(reader);
        let out = sim.gpuscope().args(&args).stdout(Stdio::null()).stderr(Stdio::from(writer)).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?} into a closed pipe");
        let full = OpenOptions::new().write(true).open("/dev/full").unwrap();
        let out = sim.gpuscope().args(&args).stdout(Stdio::null()).stderr(full).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?} into /dev/full");
    }
}
