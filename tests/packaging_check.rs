//! `packaging/check.py` is what stands between a release build and a user on
//! an old GPU server: it must fail a program that needs a glibc newer than
//! the wheel's tag promises, find the simulated NVML the binary embeds, and
//! refuse a wheel whose tags disagree. These tests run it on this build's own
//! binary (linked against this machine's glibc), with limits chosen so the
//! outcome does not depend on which glibc that is. The release wheels
//! themselves are built and checked by `.ci/run` (`packaging/build.sh`).

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output};

fn checker(args: &[&str]) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    Command::new("python3")
        .arg(root.join("packaging/check.py"))
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs packaging/check.py (.ci/run installs python3)")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_gpuscope")
}

/// The glibc this machine has, as `GLIBC_x.y` names it.
fn host_glibc() -> String {
    let out = Command::new("getconf").arg("GNU_LIBC_VERSION").output().expect("getconf runs");
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    line.rsplit(' ').next().expect("getconf prints 'glibc X.Y'").to_string()
}

#[test]
fn a_program_linked_here_passes_at_this_machines_glibc() {
    let out = checker(&["--elf", binary(), "--max-glibc", &host_glibc(), "--machine", std::env::consts::ARCH]);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn a_program_needing_a_newer_glibc_fails_and_names_the_version() {
    // Every program linked against glibc needs at least GLIBC_2.2.5 (x86_64)
    // or GLIBC_2.17 (aarch64): a limit of 2.0 must always fail.
    let out = checker(&["--elf", binary(), "--max-glibc", "2.0", "--machine", std::env::consts::ARCH]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("needs GLIBC_2."), "{said}");
    assert!(said.contains("above GLIBC_2.0"), "{said}");
    // The embedded simulated driver is checked as well as the program.
    assert!(said.contains("(embedded at byte"), "{said}");
}

#[test]
fn a_program_for_another_architecture_fails() {
    let other = if std::env::consts::ARCH == "aarch64" { "x86_64" } else { "aarch64" };
    let out = checker(&["--elf", binary(), "--max-glibc", "99.0", "--machine", other]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains(&format!("the package says {other}")), "{}", text(&out));
}

#[test]
fn a_file_that_is_not_elf_is_named() {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    file.write_all(b"#!/bin/sh\necho hi\n").expect("write");
    let path = file.path().to_str().expect("utf-8 temp path");
    let out = checker(&["--elf", path]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("not an ELF file"), "{}", text(&out));
}

#[test]
fn a_wheel_whose_tags_disagree_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let wheel = dir.path().join("gpuscope-0.1.0-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl");
    // The WHEEL file claims a newer platform than the file name does, the
    // probe module is missing, and METADATA names only one license.
    let made = Command::new("python3")
        .args(["-c", MAKE_WHEEL, wheel.to_str().expect("utf-8 path"), binary()])
        .output()
        .expect("python3 runs");
    assert!(made.status.success(), "{}", text(&made));
    let out = checker(&[wheel.to_str().expect("utf-8 path")]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("WHEEL says"), "{said}");
    assert!(said.contains("no gpuscope_probe/__init__.py"), "{said}");
    assert!(said.contains("no gpuscope-0.1.0.dist-info/licenses/LICENSE-APACHE"), "{said}");
    assert!(said.contains("names no License-File LICENSE-APACHE"), "{said}");
    assert!(!said.contains("License-File LICENSE-MIT"), "{said}");
}

const MAKE_WHEEL: &str = r#"
import sys, zipfile
wheel, program = sys.argv[1:]
with zipfile.ZipFile(wheel, "w") as zf:
    zf.writestr("gpuscope-0.1.0.dist-info/WHEEL",
                "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-manylinux_2_28_x86_64\n")
    zf.writestr("gpuscope-0.1.0.dist-info/METADATA",
                "Metadata-Version: 2.4\nName: gpuscope\nLicense-File: LICENSE-MIT\n"
                "License-Expression: MIT OR Apache-2.0\n\n# gpuscope\n")
    zf.writestr("gpuscope-0.1.0.dist-info/licenses/LICENSE-MIT", "MIT License\n")
    zf.write(program, "gpuscope-0.1.0.data/scripts/gpuscope")
"#;
