//! `gpuscope run` and `gpuscope probe` against layouts another user (or a
//! careless one) can leave behind: the command always runs, nothing is
//! followed, changed or overwritten that gpuscope did not make, and stderr
//! says in one line what happened. Layouts that need a second user are
//! made as root (files chowned to uid 65534) and skipped otherwise.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ffi::OsStr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Output;

use common::gpuscope;

/// Prints where the probe the sitecustomize started came from.
const SHOW_PROBE: &str = "import sys; m = sys.modules.get('gpuscope_probe'); print(m.__file__ if m else 'no probe')";
const NOBODY: u32 = 65534;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn skip_unless_root(test: &str, why: &str) -> bool {
    if !is_root() {
        println!("skipped {test}: {why} needs root");
    }
    !is_root()
}

/// A private runtime directory and a private /tmp (sticky, open to all,
/// like the real one) for one test.
struct Layout {
    _root: tempfile::TempDir,
    xdg: PathBuf,
    tmp: PathBuf,
}

fn layout() -> Layout {
    let root = tempfile::tempdir().unwrap();
    let xdg = root.path().join("xdg");
    let tmp = root.path().join("tmp");
    std::fs::create_dir(&xdg).unwrap();
    std::fs::set_permissions(&xdg, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::create_dir(&tmp).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
    // The tempdir itself is private; /tmp's parent is / (root's, 755).
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    Layout { _root: root, xdg, tmp }
}

fn me() -> u32 {
    // SAFETY: getuid has no preconditions.
    unsafe { libc::getuid() }
}

impl Layout {
    /// `gpuscope run --no-report -- python3 ARGS` with this layout (what
    /// stderr says of the probe's place, without the end-of-job report);
    /// `xdg: false` leaves `XDG_RUNTIME_DIR` unset, so the temporary
    /// directory is used.
    fn run(&self, xdg: bool, env: &[(&str, &OsStr)], args: &[&str]) -> Output {
        let mut cmd = gpuscope();
        cmd.args(["run", "--no-report", "--", "python3"])
            .args(args)
            .env("TMPDIR", &self.tmp)
            .env("GPUSCOPE_PROBE", "0")
            // The figures' directory is not under test here: a private one,
            // so the real /tmp never shows through.
            .env("GPUSCOPE_PROBE_DIR", self.xdg.join("probes"))
            .env_remove("PYTHONPATH");
        if xdg {
            cmd.env("XDG_RUNTIME_DIR", &self.xdg);
        } else {
            cmd.env_remove("XDG_RUNTIME_DIR");
        }
        cmd.envs(env.iter().map(|(k, v)| (*k, *v))).output().unwrap()
    }

    fn tmp_base(&self) -> PathBuf {
        self.tmp.join(format!("gpuscope-{}", me()))
    }
}

/// The command ran and its probe came from `dir`'s gpuscope_probe.py.
fn ran_with_probe_in(out: &Output) -> PathBuf {
    common::assert_success(out);
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    let file = PathBuf::from(stdout.trim());
    assert!(file.ends_with("gpuscope_probe.py"), "{stdout}");
    file.parent().unwrap().to_path_buf()
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

/// A fresh directory beside the usual place: private, ours, with both files.
fn assert_fresh_private(dir: &Path, beside: &Path) {
    let name = dir.file_name().unwrap().to_str().unwrap();
    let expected = beside.file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with(&format!("{expected}.")) && name.len() > expected.len() + 8, "{}", dir.display());
    assert_eq!(dir.parent(), std::fs::canonicalize(beside.parent().unwrap()).ok().as_deref());
    let m = std::fs::symlink_metadata(dir).unwrap();
    assert!(m.is_dir() && m.uid() == me() && m.mode() & 0o777 == 0o700);
    assert!(dir.join("sitecustomize.py").is_file());
}

#[test]
fn the_usual_place_is_private_and_reused() {
    let l = layout();
    let out = l.run(true, &[], &["-c", SHOW_PROBE]);
    let dir = ran_with_probe_in(&out);
    assert_eq!(stderr(&out), "");
    assert_eq!(dir, std::fs::canonicalize(l.xdg.join("gpuscope/python")).unwrap());
    for d in [l.xdg.join("gpuscope"), l.xdg.join("gpuscope/python")] {
        assert_eq!(std::fs::metadata(&d).unwrap().mode() & 0o777, 0o700, "{}", d.display());
    }
    // Again: the same directory, nothing new beside it.
    assert_eq!(ran_with_probe_in(&l.run(true, &[], &["-c", SHOW_PROBE])), dir);
    assert_eq!(std::fs::read_dir(&l.xdg).unwrap().count(), 1);
    // `probe path` names the same file.
    let out = gpuscope().args(["probe", "path"]).env("XDG_RUNTIME_DIR", &l.xdg).output().unwrap();
    common::assert_success(&out);
    assert_eq!(PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()), dir.join("gpuscope_probe.py"));
    // Without a runtime directory: the temporary one.
    let out = l.run(false, &[], &["-c", SHOW_PROBE]);
    assert_eq!(ran_with_probe_in(&out), std::fs::canonicalize(l.tmp_base().join("python")).unwrap());
}

#[test]
fn a_link_planted_in_the_runtime_directory_is_not_followed() {
    let l = layout();
    let victim = tempfile::tempdir().unwrap();
    std::fs::set_permissions(victim.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(victim.path(), l.xdg.join("gpuscope")).unwrap();
    let out = l.run(true, &[], &["-c", SHOW_PROBE]);
    let dir = ran_with_probe_in(&out);
    assert_fresh_private(&dir, &l.xdg.join("gpuscope"));
    let err = stderr(&out);
    assert!(err.contains("gpuscope is a symbolic link") && err.contains("instead"), "{err}");
    assert_eq!(std::fs::metadata(victim.path()).unwrap().mode() & 0o777, 0o755, "its mode is not changed");
    assert_eq!(std::fs::read_dir(victim.path()).unwrap().count(), 0, "nothing is written through the link");
}

#[test]
fn a_link_planted_in_tmp_by_another_user_is_not_followed() {
    if skip_unless_root("a_link_planted_in_tmp_by_another_user_is_not_followed", "making a file of another user") {
        return;
    }
    let l = layout();
    let victim = tempfile::tempdir().unwrap();
    std::fs::set_permissions(victim.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(victim.path(), l.tmp_base()).unwrap();
    std::os::unix::fs::lchown(l.tmp_base(), Some(NOBODY), Some(NOBODY)).unwrap();
    let out = l.run(false, &[], &["-c", SHOW_PROBE]);
    let dir = ran_with_probe_in(&out);
    assert_fresh_private(&dir, &l.tmp_base());
    let err = stderr(&out);
    let first = err.lines().next().unwrap_or_default();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(first.starts_with("gpuscope: ") && first.contains("symbolic link") && first.contains("instead"), "{err}");
    assert_eq!(std::fs::metadata(victim.path()).unwrap().mode() & 0o777, 0o755);
    assert_eq!(std::fs::read_dir(victim.path()).unwrap().count(), 0);
}

#[test]
fn a_directory_of_another_user_is_neither_used_nor_changed_and_does_not_block_the_job() {
    if skip_unless_root(
        "a_directory_of_another_user_is_neither_used_nor_changed_and_does_not_block_the_job",
        "making a file of another user",
    ) {
        return;
    }
    let l = layout();
    // Squatted and booby-trapped: a sitecustomize that would run as us.
    let squat = l.tmp_base();
    std::fs::create_dir_all(squat.join("python")).unwrap();
    let trap = squat.join("python/sitecustomize.py");
    std::fs::write(&trap, "print('PWNED')\n").unwrap();
    for p in [squat.join("python/sitecustomize.py"), squat.join("python"), squat.clone()] {
        std::os::unix::fs::chown(&p, Some(NOBODY), Some(NOBODY)).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let out = l.run(false, &[], &["-c", SHOW_PROBE]);
    let dir = ran_with_probe_in(&out);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("PWNED"));
    assert_fresh_private(&dir, &squat);
    let err = stderr(&out);
    assert!(err.contains(&format!("belongs to uid {NOBODY}")), "{err}");
    for p in [&squat, &squat.join("python")] {
        let m = std::fs::metadata(p).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o777), (NOBODY, 0o777), "{} left as it was", p.display());
    }
    assert_eq!(std::fs::read_to_string(&trap).unwrap(), "print('PWNED')\n");
    assert_eq!(std::fs::read_dir(squat.join("python")).unwrap().count(), 1);
}

#[test]
fn a_probe_dir_in_home_changes_nothing_there() {
    let l = layout();
    let home = l.tmp.parent().unwrap().join("home");
    std::fs::create_dir_all(home.join("python")).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    let theirs = home.join("python/sitecustomize.py");
    std::fs::write(&theirs, "print('mine')\n").unwrap();
    let probes = home.join("probes");
    let out = l.run(true, &[("GPUSCOPE_PROBE_DIR", probes.as_os_str())], &["-c", SHOW_PROBE]);
    let dir = ran_with_probe_in(&out);
    assert_eq!(dir, std::fs::canonicalize(l.xdg.join("gpuscope/python")).unwrap(), "not beside the probe dir");
    assert_eq!(std::fs::metadata(&home).unwrap().mode() & 0o777, 0o755, "home's mode is not changed");
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "print('mine')\n");
    assert_eq!(std::fs::read_dir(&home).unwrap().count(), 1, "nothing written into home");
    // The probe refuses that directory for its figures: said up front.
    let err = stderr(&out);
    assert!(err.contains("will not publish") && err.contains("mode 755"), "{err}");
}

#[test]
fn a_foreign_sitecustomize_in_the_usual_place_is_kept() {
    let l = layout();
    let usual = l.xdg.join("gpuscope/python");
    std::fs::create_dir_all(&usual).unwrap();
    for d in [l.xdg.join("gpuscope"), usual.clone()] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    std::fs::write(usual.join("sitecustomize.py"), "print('mine')\n").unwrap();
    let out = l.run(true, &[], &["-c", SHOW_PROBE]);
    let dir = ran_with_probe_in(&out);
    assert_fresh_private(&dir, &l.xdg.join("gpuscope"));
    assert!(stderr(&out).contains("not written by gpuscope"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(usual.join("sitecustomize.py")).unwrap(), "print('mine')\n");
}

#[test]
fn a_restrictive_umask_still_gives_a_usable_private_place() {
    let l = layout();
    let bin = gpuscope().get_program().to_os_string();
    let run = || {
        std::process::Command::new("sh")
            .arg("-c")
            .arg("umask 277; exec \"$0\" run -- python3 -c \"$1\"")
            .arg(&bin)
            .arg(SHOW_PROBE)
            .env("XDG_RUNTIME_DIR", &l.xdg)
            .env("TMPDIR", &l.tmp)
            .env("GPUSCOPE_PROBE", "0")
            .env("GPUSCOPE_PROBE_DIR", l.xdg.join("probes"))
            .env_remove("PYTHONPATH")
            .output()
            .unwrap()
    };
    let dir = ran_with_probe_in(&run());
    assert_eq!(dir, std::fs::canonicalize(l.xdg.join("gpuscope/python")).unwrap());
    assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    // The fresh directory too, when the usual place is taken.
    std::fs::rename(l.xdg.join("gpuscope"), l.xdg.join("old")).unwrap();
    std::os::unix::fs::symlink(l.xdg.join("old"), l.xdg.join("gpuscope")).unwrap();
    let dir = ran_with_probe_in(&run());
    assert_fresh_private(&dir, &l.xdg.join("gpuscope"));
}

#[test]
fn with_nowhere_to_put_the_probe_the_command_still_runs() {
    if skip_unless_root(
        "with_nowhere_to_put_the_probe_the_command_still_runs",
        "a runtime directory that is root's own",
    ) {
        return;
    }
    let l = layout();
    // Root's own, closed to others, and nothing can be created in it.
    let proc = OsStr::new("/proc");
    // A runtime directory that takes nothing: the temporary one, said once.
    let out = l.run(true, &[("XDG_RUNTIME_DIR", proc)], &["-c", SHOW_PROBE]);
    assert_eq!(ran_with_probe_in(&out), std::fs::canonicalize(l.tmp_base().join("python")).unwrap());
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot create /proc/gpuscope") && err.contains("instead"), "{err}");
    // Nowhere at all: the command runs without the probe, said once.
    let out = l.run(true, &[("XDG_RUNTIME_DIR", proc), ("TMPDIR", proc)], &["-c", SHOW_PROBE]);
    common::assert_success(&out);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "no probe");
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("gpuscope: ") && err.contains("running the command without the allocator probe"), "{err}");
}

#[test]
fn python_flags_that_stop_the_probe_are_named_once() {
    let l = layout();
    let cases: [(&[&str], &str); 4] = [
        (&["-I"], "python3 -I ignores PYTHONPATH"),
        (&["-E"], "python3 -E ignores PYTHONPATH"),
        (&["-sE"], "python3 -E ignores PYTHONPATH"),
        (&["-S"], "python3 -S skips sitecustomize"),
    ];
    for (flags, said) in cases {
        let args: Vec<&str> = flags.iter().copied().chain(["-c", SHOW_PROBE]).collect();
        let out = l.run(true, &[], &args);
        common::assert_success(&out);
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "no probe", "{flags:?}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{flags:?}: {err}");
        assert!(err.starts_with(&format!("gpuscope: {said}")), "{flags:?}: {err}");
        assert!(err.contains("import gpuscope_probe; gpuscope_probe.start()"), "{err}");
    }
    // Flags that leave PYTHONPATH and sitecustomize alone: nothing said.
    let out = l.run(true, &[], &["-s", "-P", "-u", "-c", SHOW_PROBE]);
    ran_with_probe_in(&out);
    assert_eq!(stderr(&out), "");
}

#[test]
fn probe_install_replaces_only_a_gpuscope_probe() {
    let base = tempfile::tempdir().unwrap();
    let install = || {
        gpuscope()
            .args(["probe", "install", "--python", "python3"])
            .env("PYTHONUSERBASE", base.path())
            .env_remove("PYTHONNOUSERSITE")
            .output()
            .unwrap()
    };
    let out = install();
    common::assert_success(&out);
    let line = String::from_utf8(out.stdout).unwrap();
    let installed = PathBuf::from(line.lines().next().unwrap().strip_prefix("installed ").unwrap());
    assert!(installed.starts_with(base.path()), "{line}");
    let ours = std::fs::read_to_string(&installed).unwrap();
    assert!(ours.starts_with("\"\"\"gpuscope allocator probe"));

    std::fs::write(&installed, "# my own gpuscope_probe\n").unwrap();
    let out = install();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not written by gpuscope; not replacing it"), "{err}");
    assert_eq!(std::fs::read_to_string(&installed).unwrap(), "# my own gpuscope_probe\n");

    // An older gpuscope probe is updated.
    std::fs::write(&installed, "\"\"\"gpuscope allocator probe, an older one\n").unwrap();
    common::assert_success(&install());
    assert_eq!(std::fs::read_to_string(&installed).unwrap(), ours);
}
