//! Builds the simulated NVML library (`crates/nvml-sim`) and hands its path to
//! the main crate, which embeds it so that `gpuscope --demo` works from any
//! installed binary, and tests load the very same library the demo does.
//!
//! Cargo cannot yet depend on a `cdylib` artifact on stable, so this runs a
//! nested `cargo build` with its own target directory: the outer build holds
//! the lock on the usual one.
//!
//! The nested build is for the outer build's target, not the machine it runs
//! on: a wheel or tarball built for aarch64, or linked by zig against glibc
//! 2.17 (`packaging/build.sh`), must embed a simulator that loads where the
//! binary runs. The linker settings (`CARGO_TARGET_<TRIPLE>_LINKER`, `CC_*`)
//! that maturin or cargo-zigbuild put in the environment reach the nested
//! cargo unchanged.

// A build script reports failure by panicking with a message cargo shows.
#![allow(clippy::expect_used)]

use std::env;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    for watched in ["crates/nvml-sim/src", "crates/nvml-sim/scenarios", "crates/nvml-sim/Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={watched}");
    }

    let release = env::var("PROFILE").as_deref() == Ok("release");
    let target = env::var("TARGET").expect("set by cargo");
    let target_dir = out_dir.join("sim-target");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .args(["--offline", "--locked", "--lib", "-p", "gpuscope-nvml-sim"])
        .arg("--manifest-path")
        .arg(manifest_dir.join("Cargo.toml"))
        .args(["--target", &target])
        .arg("--target-dir")
        .arg(&target_dir);
    if release {
        cmd.arg("--release");
    }
    // `cargo clippy` and coverage tools wrap rustc for the outer workspace;
    // the simulator is a build input here, not code under inspection.
    for var in ["RUSTC_WORKSPACE_WRAPPER", "CARGO_TARGET_DIR", "CARGO_BUILD_TARGET_DIR"] {
        cmd.env_remove(var);
    }
    // Cargo reads build-script stdout as directives, so the nested build's
    // output must not reach it.
    cmd.stdout(Stdio::null());
    let status = cmd.status().expect("running the nested cargo build of the NVML simulator");
    assert!(status.success(), "building the NVML simulator (crates/nvml-sim) failed: {status}");

    let (prefix, suffix) = match env::var("CARGO_CFG_TARGET_OS").as_deref() {
        Ok("macos") => ("lib", "dylib"),
        Ok("windows") => ("", "dll"),
        _ => ("lib", "so"),
    };
    let file = format!("{prefix}gpuscope_nvml_sim.{suffix}");
    let built = target_dir.join(&target).join(if release { "release" } else { "debug" }).join(&file);
    let stable = out_dir.join(&file);
    std::fs::copy(&built, &stable).unwrap_or_else(|e| panic!("copying {}: {e}", built.display()));
    println!("cargo:rustc-env=GPUSCOPE_SIM_LIB={}", stable.display());
}
