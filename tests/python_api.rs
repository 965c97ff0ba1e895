//! The Python API (`python/gpuscope`) and its examples (`examples/python`):
//! their suite, `tests/python/test_api.py` (standard library `unittest`),
//! run against this build's program (`GPUSCOPE_BIN`) with `python/` on
//! PYTHONPATH. packaging/check.py runs the same suite against the wheel
//! installed in a fresh virtual environment. `GPUSCOPE_TEST_PYTHON` picks
//! the interpreter (default `python3`).

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};

#[test]
fn python_api_suite_passes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var_os("GPUSCOPE_TEST_PYTHON").unwrap_or_else(|| "python3".into());
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(&python)
        .args(["-m", "unittest", "discover", "-s", "tests/python", "-t", "tests/python", "-v"])
        .current_dir(root)
        .env("GPUSCOPE_BIN", env!("CARGO_BIN_EXE_gpuscope"))
        .env("PYTHONPATH", root.join("python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        // No user config, driver or probe directory of the developer's.
        .env("XDG_CONFIG_HOME", home.path())
        .env("XDG_RUNTIME_DIR", home.path())
        .env_remove("GPUSCOPE_NVML_LIB")
        .env_remove("GPUSCOPE_SIM_SCENARIO")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the Python API suite failed:\n{stderr}");
    assert!(stderr.contains("Ran ") && stderr.contains("OK"), "{stderr}");
}
