//! `gpuscope completions` and `gpuscope man` from the real binary: bash
//! loads the script and completes a flag with it; the page is roff that
//! `man` can format.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::gpuscope;

#[test]
fn bash_loads_the_completion_and_completes_a_flag() {
    let out = gpuscope().args(["completions", "bash"]).output().unwrap();
    assert!(out.status.success());
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("gpuscope.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    // Drive the completion function the way bash's readline would for
    // `gpuscope --que<TAB>`.
    let drive = format!(
        "source {}; COMP_WORDS=(gpuscope --que); COMP_CWORD=1; COMP_LINE='gpuscope --que'; COMP_POINT=14; \
         _gpuscope gpuscope --que gpuscope; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let done = std::process::Command::new("bash").args(["--norc", "-c", &drive]).output().unwrap();
    let words = String::from_utf8(done.stdout).unwrap();
    assert!(words.lines().any(|w| w == "--query-gpu"), "{words}\n{}", String::from_utf8_lossy(&done.stderr));
    assert!(words.lines().any(|w| w == "--query-compute-apps"), "{words}");
}

#[test]
fn unknown_shell_is_a_usage_error() {
    let out = gpuscope().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tcsh"));
}

#[test]
fn the_man_page_formats_with_every_subcommand() {
    let out = gpuscope().arg("man").output().unwrap();
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains(".TH gpuscope 1"), "{page}");
    for section in ["GPUSCOPE SERVE", "GPUSCOPE MEMVIZ", "GPUSCOPE PROBE INSTALL", "GPUSCOPE COMPLETIONS"] {
        assert!(page.contains(&format!(".SH \"{section}\"")), "no {section} section");
    }
}
