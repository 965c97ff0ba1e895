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

/// A C program with a function named as rustc names gpuscope's `main`
/// (another build's hash), compiled with a section per function as rustc
/// does, and linked with or without `packaging/hot_text.ld` by this
/// machine's C toolchain, as cargo links on it.
fn c_program(dir: &Path, with_script: bool) -> String {
    let source = dir.join("hot.c");
    std::fs::write(
        &source,
        "int _ZN8gpuscope4main17h0123456789abcdefE(void) { return 7; }\n\
         int main(void) { return _ZN8gpuscope4main17h0123456789abcdefE() - 7; }\n",
    )
    .unwrap();
    let program = dir.join(if with_script { "grouped" } else { "plain" });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/hot_text.ld");
    let mut cc = Command::new("cc");
    cc.arg("-ffunction-sections").arg("-o").arg(&program).arg(&source);
    if with_script {
        cc.arg(format!("-Wl,-T,{}", script.display()));
    }
    let out = cc.output().expect("cc runs (cargo needs it to link)");
    assert!(out.status.success(), "{}", text(&out));
    let ran = Command::new(&program).status().unwrap();
    assert!(ran.success(), "the linked program runs");
    program.to_str().unwrap().to_string()
}

#[test]
fn the_hot_text_script_links_and_groups_what_it_names_whatever_the_hash() {
    let dir = tempfile::tempdir().unwrap();
    let args =
        |p: &str| checker(&["--elf", p, "--hot-text", "--max-glibc", "99.0", "--machine", std::env::consts::ARCH]);
    let grouped = args(&c_program(dir.path(), true));
    assert!(!text(&grouped).contains("no .text.hot"), "{}", text(&grouped));
    let plain = args(&c_program(dir.path(), false));
    assert_eq!(plain.status.code(), Some(1), "{}", text(&plain));
    assert!(text(&plain).contains("no .text.hot: the code it runs is not grouped"), "{}", text(&plain));
}

/// What callgrind writes with --demangle=no: names given at first use and
/// referred to by number after, functions of several objects.
const PROFILE: &str = "\
events: Ir
ob=(1) /usr/lib/libc.so.6
fn=(1) memcpy
0 5
ob=(2) /opt/gpuscope
fn=(2) _RNvNtCs9Xy_3std3env4__var
0 3
cob=(1)
cfn=(1)
calls=1 0
0 5
fn=(3) _ZN8gpuscope4main17h0123456789abcdefE
0 1
fn=(4) _RNvCsAb_8gpuscope4tick.llvm.12345
0 1
fn=(5) 0x0000000000293560
0 1
fn=(6) floor
0 1
fn=(7) _RNvNtNtCsbE_13unicode_width6lookup3gen12lookup_width.737
0 1
fn=(2)
0 1
";

#[test]
fn hot_text_names_what_ran_in_the_program_with_hashes_as_wildcards() {
    let dir = tempfile::tempdir().unwrap();
    let (profile, script) = (dir.path().join("callgrind.dashboard.out"), dir.path().join("hot.ld"));
    std::fs::write(&profile, PROFILE).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .arg(root.join("packaging/hot_text.py"))
        .args([&script, Path::new("/opt/gpuscope"), &profile])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let written = std::fs::read_to_string(&script).unwrap();
    let patterns: Vec<&str> = written.lines().filter(|l| l.trim_start().starts_with("*(")).collect();
    assert_eq!(
        patterns,
        [
            "    *(.text._RNvCs*_8gpuscope4tick.llvm.* .text.unlikely._RNvCs*_8gpuscope4tick.llvm.*)",
            "    *(.text._RNvNtCs*_3std3env4__var .text.unlikely._RNvNtCs*_3std3env4__var)",
            "    *(.text._RNvNtNtCs*_13unicode_width6lookup3gen12lookup_width.* \
             .text.unlikely._RNvNtNtCs*_13unicode_width6lookup3gen12lookup_width.*)",
            "    *(.text._ZN8gpuscope4main17h*E .text.unlikely._ZN8gpuscope4main17h*E)",
            "    *(.text.floor .text.unlikely.floor)",
        ],
        "libc's memcpy and the unnamed address are left out; the program's own C name is kept; LLVM's numbered \
         copy of a function is any copy (the number changes from one link to the next):\n{written}"
    );
    assert!(written.contains("/* dashboard: 5 */") && written.contains("}\nINSERT BEFORE .text;"), "{written}");
    assert!(
        written.contains(".gpuscope.cold : { KEEP(*(.gpuscope.cold)) }")
            && written.trim_end().ends_with("INSERT AFTER .rodata;"),
        "the large constants no dashboard reads follow .rodata:\n{written}"
    );

    // A dashboard's start-up profile after its ticks': start-up code, the C
    // runtime's entry with it, in the section handed back after start-up.
    let start = dir.path().join("callgrind.dashboard-start.out");
    std::fs::write(&start, PROFILE).unwrap();
    let out = Command::new("python3")
        .arg(root.join("packaging/hot_text.py"))
        .args([&script, Path::new("/opt/gpuscope"), &profile, &start])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let written = std::fs::read_to_string(&script).unwrap();
    let once = written.split("  .text.once :").nth(1).unwrap_or_default();
    assert!(
        written.contains("  .text.hot :")
            && once.starts_with("\n  {\n    /* dashboard-start: 0 */\n    *crt1.o(.text)\n"),
        "{written}"
    );

    // What a dashboard runs only minutes in (`-late`) joins its ticks in
    // `.text.hot`, ahead of start-up's section, and only what the ticks'
    // profile did not already name.
    let late = dir.path().join("callgrind.dashboard-late.out");
    std::fs::write(&late, format!("{PROFILE}fn=(8) _RNvNtCsAb_8gpuscope7history4roll\n0 1\n")).unwrap();
    let out = Command::new("python3")
        .arg(root.join("packaging/hot_text.py"))
        .args([&script, Path::new("/opt/gpuscope"), &profile, &late, &start])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let written = std::fs::read_to_string(&script).unwrap();
    let (hot, once) = written.split_once("  .text.once :").unwrap_or_default();
    assert!(
        hot.contains("    /* dashboard-late: 1 */\n    *(.text._RNvNtCs*_8gpuscope7history4roll ")
            && !once.contains("history4roll")
            && once.starts_with("\n  {\n    /* dashboard-start: 0 */\n"),
        "{written}"
    );
}

/// Sorted in this test only: its sort routines are instances of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Shuffled(u32);

#[test]
fn a_sort_that_ran_brings_every_routine_of_its_kind() {
    // Rows that come in order run the sort's merges and never its
    // quicksort, which then sat in cold pages for the first shuffled ones.
    let mut v: Vec<Shuffled> = (0..100).rev().map(Shuffled).collect();
    v.sort();
    assert_eq!(v.first(), Some(&Shuffled(0)));
    let exe = std::env::current_exe().unwrap();
    let nm = Command::new("nm").arg("--defined-only").arg(&exe).output().unwrap();
    assert!(nm.status.success(), "{}", text(&nm));
    let ours: Vec<String> = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|l| l.split(' ').nth(2))
        .filter(|s| s.contains("4core5slice4sort") && s.contains("8Shuffled"))
        .map(str::to_string)
        .collect();
    let entry = ours.iter().find(|s| s.contains("driftsort_main")).expect("the sort's entry is an instance");
    assert!(ours.iter().any(|s| s.contains("9quicksort9quicksort")), "and its quicksort: {ours:?}");

    let dir = tempfile::tempdir().unwrap();
    let (profile, script) = (dir.path().join("callgrind.dashboard.out"), dir.path().join("hot.ld"));
    let exe_name = exe.canonicalize().unwrap();
    std::fs::write(&profile, format!("events: Ir\nob=(1) {}\nfn=(1) {entry}\n0 1\n", exe_name.display())).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .arg(root.join("packaging/hot_text.py"))
        .arg(&script)
        .arg(&exe)
        .arg(&profile)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let written = std::fs::read_to_string(&script).unwrap();
    let sorts: Vec<&str> = written.lines().filter(|l| l.contains("4core5slice4sort")).collect();
    assert!(sorts.iter().any(|l| l.contains("9quicksort9quicksort")), "{written}");
    assert!(sorts.len() >= ours.len().min(3), "{} of {} routines:\n{written}", sorts.len(), ours.len());
    assert!(sorts.iter().all(|l| l.contains("8Shuffled")), "other types' sorts stay out:\n{written}");
}
