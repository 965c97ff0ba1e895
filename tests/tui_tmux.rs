//! The dashboard in a real terminal: `gpuscope --demo` in a detached tmux
//! session of its own (its own server socket), driven with send-keys and
//! read with capture-pane. Checks that it draws, answers keys, follows a
//! resize, and hands the terminal back sane (canonical mode and echo on,
//! the alternate screen left) after `q` and after SIGHUP.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A tmux server for this test alone, killed when the test ends, however
/// it ends. Its socket is in a temporary directory of the test's own:
/// tmux 3.3 leaves a killed server's socket behind, and the directory goes
/// with it.
struct Tmux {
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmux {
    fn start(width: u16, height: u16) -> Self {
        let found = Command::new("tmux").arg("-V").output();
        assert!(
            found.as_ref().is_ok_and(|o| o.status.success()),
            "tmux is needed for this test and was not found; .ci/run installs it (apt-get install tmux)"
        );
        // One server per test: tests run in parallel, and each kills its own.
        let dir = tempfile::tempdir().unwrap();
        let tmux = Self { socket: dir.path().join("tmux"), _dir: dir };
        let (w, h) = (width.to_string(), height.to_string());
        tmux.run(&["-f", "/dev/null", "new-session", "-d", "-x", &w, "-y", &h, "bash", "--norc", "--noprofile"]);
        tmux
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = Command::new("tmux").arg("-S").arg(&self.socket).args(args).output().unwrap();
        assert!(out.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out
    }

    fn line(&self, text: &str) {
        self.run(&["send-keys", "-l", text]);
        self.run(&["send-keys", "Enter"]);
    }

    fn key(&self, key: &str) {
        self.run(&["send-keys", key]);
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p"]).stdout).into_owned()
    }

    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(Instant::now() < deadline, "the pane never showed {what}:\n{screen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn shows(&self, text: &str) -> String {
        self.wait_for(text, |s| s.contains(text))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").arg("-S").arg(&self.socket).arg("kill-server").output();
    }
}

/// A script that records its PID, then becomes `gpuscope ARGS` (same PID).
fn launcher(dir: &Path, args: &str) -> PathBuf {
    launcher_with(dir, "", args)
}

/// `launcher`, with `env` (`export NAME='value' ...`) run first.
fn launcher_with(dir: &Path, env: &str, args: &str) -> PathBuf {
    let bin = assert_cmd::cargo::cargo_bin("gpuscope");
    let script = dir.join("launch.sh");
    let text = format!(
        "export XDG_CONFIG_HOME='{d}/config' GPUSCOPE_PROBE_DIR='{d}/probes' LANG=C.UTF-8 LC_ALL=\n\
         unset NO_COLOR GPUSCOPE_NVML_LIB GPUSCOPE_SIM_SCENARIO\n\
         {env}\n\
         echo $$ > '{d}/pid'\n\
         exec '{bin}' {args}\n",
        d = dir.display(),
        bin = bin.display()
    );
    std::fs::write(&script, text).unwrap();
    script
}

fn pid(dir: &Path) -> u32 {
    let path = dir.join("pid");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = std::fs::read_to_string(&path).ok().and_then(|s| s.trim().parse().ok()) {
            return pid;
        }
        assert!(Instant::now() < deadline, "the launcher never wrote its PID");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_exit(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(Instant::now() < deadline, "gpuscope (PID {pid}) did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The shell is back, on the normal screen, with a sane terminal.
fn assert_restored(tmux: &Tmux, marker: &str, when: &str) {
    let screen = tmux.wait_for("the shell's screen again", |s| s.contains(marker) && !s.contains("GPUs"));
    assert!(!screen.contains("Processes"), "{when}: the dashboard is still on screen:\n{screen}");
    tmux.line("clear; stty -a; echo stty-done");
    let screen = tmux.wait_for("stty's report", |s| s.lines().any(|l| l.trim() == "stty-done"));
    let flags: Vec<&str> = screen.split_whitespace().collect();
    for good in ["icanon", "echo", "isig", "icrnl", "opost"] {
        assert!(flags.contains(&good), "{when}: {good} is off:\n{screen}");
    }
    for bad in ["-icanon", "-echo", "-isig"] {
        assert!(!flags.contains(&bad), "{when}: {bad}:\n{screen}");
    }
}

fn start_dashboard(tmux: &Tmux, dir: &Path, marker: &str) -> u32 {
    start(tmux, dir, marker, "--demo")
}

fn start(tmux: &Tmux, dir: &Path, marker: &str, args: &str) -> u32 {
    start_with(tmux, dir, marker, "", args)
}

fn start_with(tmux: &Tmux, dir: &Path, marker: &str, env: &str, args: &str) -> u32 {
    let _ = std::fs::remove_file(dir.join("pid"));
    tmux.line(&format!("clear; echo {marker}; sh {}", launcher_with(dir, env, args).display()));
    let pid = pid(dir);
    tmux.wait_for("the dashboard", |s| s.contains("GPUs") && s.contains("NVIDIA H100 80GB HBM3"));
    pid
}

#[test]
fn dashboard_in_a_real_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let tmux = Tmux::start(80, 24);
    tmux.line("PS1='$ '");

    let pid = start_dashboard(&tmux, dir.path(), "before-the-dashboard");
    let screen = tmux.screen();
    assert!(screen.contains("Processes") && screen.contains("vllm"), "{screen}");
    assert_eq!(screen.lines().count(), 24, "{screen}");

    tmux.key("?");
    tmux.shows("this help");
    tmux.key("Escape");
    tmux.wait_for("help closed", |s| !s.contains("this help"));
    tmux.key("Tab");
    tmux.shows("focus: GPU 0");

    tmux.run(&["resize-window", "-x", "120", "-y", "40"]);
    let wide = tmux.wait_for("a 120x40 frame", |s| {
        s.lines().count() == 40 && s.lines().any(|l| l.chars().count() > 80) && s.contains("Processes")
    });
    // The header's right end (the alert count) is drawn at the new width.
    let header_ends_with_count = |l: &str| l.trim_end().ends_with("alert") || l.trim_end().ends_with("alerts");
    assert!(wide.lines().next().is_some_and(header_ends_with_count), "{wide}");

    tmux.key("q");
    wait_exit(pid);
    assert_restored(&tmux, "before-the-dashboard", "after q");

    let pid = start_dashboard(&tmux, dir.path(), "before-the-hangup");
    let sent = Command::new("kill").args(["-HUP", &pid.to_string()]).status().unwrap();
    assert!(sent.success());
    wait_exit(pid);
    assert_restored(&tmux, "before-the-hangup", "after SIGHUP");
}

/// Ctrl-Z hands the terminal back to the shell as it was (normal screen,
/// cursor, cooked mode); `fg` brings the dashboard back, drawn whole, and
/// keys work again. `kill -TSTP` does the same as the key.
#[test]
fn ctrl_z_suspends_and_fg_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let tmux = Tmux::start(80, 24);
    tmux.line("PS1='$ '");
    let pid = start_dashboard(&tmux, dir.path(), "before-the-suspend");
    for (how, stop) in [("Ctrl-Z", None), ("SIGTSTP", Some("-TSTP"))] {
        match stop {
            None => tmux.key("C-z"),
            Some(sig) => assert!(Command::new("kill").args([sig, &pid.to_string()]).status().unwrap().success()),
        }
        let screen = tmux.wait_for("the shell's prompt", |s| s.contains("Stopped") && !s.contains("GPUs"));
        assert!(screen.contains("before-the-suspend"), "{how}: the normal screen is back:\n{screen}");
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        assert!(state.rsplit(')').next().unwrap().trim_start().starts_with('T'), "{how}: stopped: {state}");
        tmux.line("stty -a; echo stty-done");
        let screen = tmux.wait_for("stty's report", |s| s.lines().any(|l| l.trim() == "stty-done"));
        let flags: Vec<&str> = screen.split_whitespace().collect();
        for good in ["icanon", "echo", "isig"] {
            assert!(flags.contains(&good), "{how}: {good} is off while suspended:\n{screen}");
        }
        // What the normal screen shows when the dashboard ends.
        tmux.line("clear; echo before-the-suspend");
        tmux.wait_for("a clear screen", |s| s.lines().next().is_some_and(|l| l.contains("before-the-suspend")));
        tmux.line("fg");
        let screen = tmux.wait_for("the dashboard again", |s| s.contains("GPUs") && s.contains("Processes"));
        assert!(!screen.contains("stty-done") && !screen.contains("Stopped"), "{how}: not redrawn whole:\n{screen}");
        assert_eq!(screen.lines().count(), 24, "{screen}");
        tmux.key("?");
        tmux.shows("this help");
        tmux.key("Escape");
        tmux.wait_for("help closed", |s| !s.contains("this help"));
    }
    tmux.key("q");
    wait_exit(pid);
    assert_restored(&tmux, "before-the-suspend", "after suspend, fg and q");

    // Under a shell without job control nothing would resume it: Ctrl-Z
    // says so instead of stopping.
    let _ = std::fs::remove_file(dir.path().join("pid"));
    let launch = launcher(dir.path(), "--demo");
    tmux.line(&format!("clear; echo no-job-control; sh -c 'sh {}; true'", launch.display()));
    let pid = self::pid(dir.path());
    tmux.wait_for("the dashboard", |s| s.contains("GPUs") && s.contains("NVIDIA H100 80GB HBM3"));
    tmux.key("C-z");
    tmux.shows("not suspended: no shell with job control");
    tmux.key("q");
    wait_exit(pid);
    assert_restored(&tmux, "no-job-control", "after Ctrl-Z without job control");
}

#[test]
fn replay_in_a_real_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.ndjson.zst");
    let recorded = Command::new(assert_cmd::cargo::cargo_bin("gpuscope"))
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .env("GPUSCOPE_PROBE_DIR", dir.path().join("probes"))
        .env_remove("GPUSCOPE_NVML_LIB")
        .args(["--demo", "record"])
        .arg(&file)
        .args(["--interval", "100ms", "--duration", "2s"])
        .output()
        .unwrap();
    assert!(recorded.status.success(), "{}", String::from_utf8_lossy(&recorded.stderr));

    let tmux = Tmux::start(80, 24);
    tmux.line("PS1='$ '");
    let pid = start(&tmux, dir.path(), "before-the-replay", &format!("replay '{}'", file.display()));
    let screen = tmux.shows("REPLAY x1 ");
    assert!(screen.contains("run.ndjson.zst") && screen.contains("Processes"), "{screen}");
    tmux.key("Space");
    tmux.shows("REPLAY paused");
    tmux.key("Space");
    tmux.wait_for("playing again", |s| !s.contains("REPLAY paused"));
    // Ten seconds on is past the end of two: the last snapshot stays.
    tmux.key("Right");
    tmux.wait_for("the end of the recording", |s| s.contains("REPLAY end") && s.contains("NVIDIA H100 80GB HBM3"));
    tmux.key("q");
    wait_exit(pid);
    assert_restored(&tmux, "before-the-replay", "after q in a replay");
}

/// htop's function keys as a real terminal sends them: F4 filters, F3
/// searches without hiding a row, F5 draws the process tree.
#[test]
fn htop_function_keys_in_a_real_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let tmux = Tmux::start(100, 30);
    tmux.line("PS1='$ '");
    let pid = start_dashboard(&tmux, dir.path(), "before-the-keys");
    tmux.shows("Processes 3");
    tmux.key("F4");
    tmux.run(&["send-keys", "-l", "vllm"]);
    tmux.shows("Processes 1");
    tmux.key("Escape");
    tmux.shows("Processes 3");
    tmux.key("F3");
    tmux.run(&["send-keys", "-l", "alice"]);
    let selected = |pid: &'static str| move |s: &str| s.lines().any(|l| l.starts_with('>') && l.contains(pid));
    let screen = tmux.wait_for("rank 1 selected", selected("4123402"));
    assert!(screen.contains("search: alice_") && screen.contains("Processes 3"), "{screen}");
    tmux.key("F3");
    tmux.wait_for("F3 again: rank 0 selected", selected("4123401"));
    tmux.key("Enter");
    tmux.wait_for("the prompt closed", |s| !s.contains("search:"));
    // The demo's ranks are torchrun's children: F5 draws the tree.
    tmux.key("F5");
    let tree = tmux.shows(" tree ");
    assert!(tree.lines().any(|l| l.contains("4123399") && l.contains("torchrun")), "{tree}");
    // At 100 columns UTIL% leaves the command its least.
    assert!(tree.contains("└─ python3 train"), "{tree}");
    tmux.key("t");
    tmux.wait_for("the tree off", |s| !s.contains(" tree ") && s.contains("Processes 3"));
    let mouse =
        || String::from_utf8_lossy(&tmux.run(&["display", "-p", "#{mouse_any_flag}"]).stdout).trim().to_string();
    assert_eq!(mouse(), "1", "the dashboard takes the mouse");
    tmux.key("q");
    wait_exit(pid);
    assert_restored(&tmux, "before-the-keys", "after F3 and F4");
    assert_eq!(mouse(), "0", "and gives it back");
    let pid = start(&tmux, dir.path(), "no-mouse", "--demo --no-mouse");
    assert_eq!(mouse(), "0", "--no-mouse leaves it to the terminal");
    tmux.key("q");
    wait_exit(pid);
}

/// The dashboard asks the driver for the current clocks and the PCIe
/// rates only while it shows them, by the simulated NVML's log of calls:
/// none at 80x24; both in a process's details and on a 300-column line;
/// none again back at 80 columns.
#[test]
fn the_dashboard_asks_for_clocks_and_pcie_rates_only_while_it_shows_them() {
    use common::{Sim, Sleeper, calls_to};
    let trainer = Sleeper::spawn(&["60"]);
    let (sim, log) = Sim::logged(&format!(
        "[[gpu]]\nname = \"NVIDIA H100 80GB HBM3\"\n[[gpu.process]]\npid = {}\nused_mib = 1024\n[gpu.gpm]\nsm_util = 50\n",
        trainer.pid()
    ));
    let tmux = Tmux::start(80, 24);
    tmux.line("PS1='$ '");
    let env = format!(
        "export GPUSCOPE_SIM_SCENARIO='{}' GPUSCOPE_PID_NAMESPACE=host XDG_RUNTIME_DIR='{}'",
        sim.scenario.display(),
        sim.dir.path().display()
    );
    let args = format!("--nvml-lib '{}' --interval 100ms", sim.lib.display());
    let pid = start_with(&tmux, sim.dir.path(), "before-the-readings", &env, &args);
    // Ticks, by the one call each makes once for the GPU.
    let ticks = || calls_to(&log, "nvmlDeviceGetUtilizationRates");
    let after_ticks = |n: usize| {
        std::fs::write(&log, "").unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while ticks() < n {
            assert!(Instant::now() < deadline, "{n} ticks never came");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let asked = || (calls_to(&log, "nvmlDeviceGetClockInfo"), calls_to(&log, "nvmlDeviceGetFieldValues"));
    // The first ticks read the health counters, a field-value call.
    after_ticks(3);
    after_ticks(5);
    assert_eq!(asked(), (0, 0), "at 80x24, over {} ticks", ticks());
    tmux.key("Enter");
    tmux.shows("Esc: back");
    tmux.shows("memory clock 2619 MHz");
    after_ticks(3);
    let (clocks, fields) = asked();
    assert!(clocks >= 4 * 2 && fields >= 2, "the details show them: {clocks} and {fields} over {} ticks", ticks());
    tmux.key("Escape");
    tmux.wait_for("the details closed", |s| !s.contains("Esc: back"));
    tmux.run(&["resize-window", "-x", "300", "-y", "50"]);
    tmux.shows("PCIe rx");
    after_ticks(3);
    let (clocks, fields) = asked();
    assert!(clocks >= 4 * 2 && fields >= 2, "a 300-column line shows them: {clocks} and {fields}");
    tmux.run(&["resize-window", "-x", "80", "-y", "24"]);
    tmux.wait_for("80 columns", |s| !s.contains("PCIe rx") && s.lines().all(|l| l.chars().count() <= 80));
    after_ticks(2);
    after_ticks(5);
    assert_eq!(asked(), (0, 0), "back at 80x24, over {} ticks", ticks());
    tmux.key("q");
    wait_exit(pid);
}
