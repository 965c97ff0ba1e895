//! The allocator probe gpuscope ships (`assets/gpuscope_probe.py`, its
//! `sitecustomize.py`) is Python; its suite lives in `tests/probe/` (standard
//! library `unittest`, a stand-in torch, no GPU). Running it here keeps it
//! under `cargo test`. `GPUSCOPE_TEST_PYTHON` picks the interpreter
//! (default `python3`).

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The suite takes about 15 s; this only guards against a hung child.
const LIMIT: Duration = Duration::from_secs(300);

/// Settings a developer's shell may carry that would change what the suite
/// sees (a `gpuscope run` shell puts the probe on PYTHONPATH, for one).
const CLEARED: &[&str] = &[
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "GPUSCOPE_PROBE",
    "GPUSCOPE_PROBE_DIR",
    "GPUSCOPE_PROBE_INTERVAL",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_ALLOC_CONF",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
];

fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

#[test]
fn python_probe_suite_passes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var_os("GPUSCOPE_TEST_PYTHON").unwrap_or_else(|| "python3".into());
    let mut command = Command::new(&python);
    command
        .args(["-m", "unittest", "discover", "-s", "tests/probe", "-t", "tests/probe", "-v"])
        .current_dir(root)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for name in CLEARED {
        command.env_remove(name);
    }
    // No Python is a failure, not a skip: the probe ships with gpuscope and
    // the test machine must be able to check it (.ci/run installs python3).
    let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot start {}: {e}", python.to_string_lossy()));
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));

    let began = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the probe suite") {
            break Some(status);
        }
        if began.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    let report = format!("--- stdout ---\n{stdout}\n--- stderr (unittest writes here) ---\n{stderr}");
    match status {
        None => panic!("probe suite still running after {LIMIT:?}, killed\n{report}"),
        Some(status) => assert!(status.success(), "probe suite failed ({status})\n{report}"),
    }
    // Shown with --nocapture: the per-test lines and the total.
    println!("{stderr}");
}
