//! Python command lines on which `gpuscope run` cannot start the probe.
//! From Python's documentation (Command line and environment): `-E`
//! ignores every `PYTHON*` variable, `PYTHONPATH` included; `-I` implies
//! `-E` (and `-s`, `-P`); `-S` skips `import site`, and `site` is what
//! imports `sitecustomize`. `-s`, `-P` and their variables
//! (`PYTHONNOUSERSITE`, `PYTHONSAFEPATH`) leave both alone, and no
//! environment variable turns off `PYTHONPATH` or `site`, so the command
//! line is all there is to read: the command itself when it is a Python,
//! or the `#!` line of the script it names.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Enough for any `#!` line the kernel accepts.
const SHEBANG_MAX: u64 = 512;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Flags {
    /// `E` or `I`: `PYTHONPATH` is ignored.
    no_env: Option<char>,
    /// `S`: no `sitecustomize`.
    no_site: bool,
}

/// One line saying why the probe will not start and how to start it, or
/// `None` when nothing on the command line stops it.
pub fn warning(program: &OsStr, args: &[OsString]) -> Option<String> {
    let (python, flags, via) = if is_python(program) {
        (program.to_os_string(), scan(args), None)
    } else {
        let (python, args) = shebang(program)?;
        (python, scan(&args), Some(program))
    };
    let name = Path::new(&python).file_name().unwrap_or(&python).to_string_lossy().into_owned();
    let via = via.map(|p| format!(" (the #! line of {})", p.to_string_lossy())).unwrap_or_default();
    let start = "call `import gpuscope_probe; gpuscope_probe.start()` in the script";
    match flags {
        Flags { no_env: Some('I'), .. } => Some(format!(
            "{name} -I{via} ignores PYTHONPATH and the user site, so the allocator probe cannot start; \
             drop -I, or install the probe into that Python's environment (`gpuscope probe install` in a virtualenv) and {start}"
        )),
        Flags { no_env: Some(flag), .. } => Some(format!(
            "{name} -{flag}{via} ignores PYTHONPATH, so the allocator probe cannot start; \
             drop -{flag}, or run `gpuscope probe install` and {start}"
        )),
        Flags { no_site: true, .. } => Some(format!(
            "{name} -S{via} skips sitecustomize, so the allocator probe cannot start by itself; \
             drop -S, or {start} (gpuscope_probe is on PYTHONPATH)"
        )),
        Flags { .. } => None,
    }
}

/// `python`, `python3`, `python3.12`, `python3.13t`, any directory.
fn is_python(program: &OsStr) -> bool {
    let Some(name) = Path::new(program).file_name().and_then(OsStr::to_str) else { return false };
    let Some(rest) = name.strip_prefix("python") else { return false };
    let version = rest.strip_suffix(|c: char| c.is_ascii_lowercase()).unwrap_or(rest);
    version.chars().all(|c| c.is_ascii_digit() || c == '.') && !version.starts_with('.')
}

/// Python's own option syntax: short flags may be grouped (`-IS`), `-W`
/// and `-X` take a value (attached or next), `-c` and `-m` end the
/// options, and so do `-`, `--` and the first argument not starting with
/// `-` (the script).
fn scan(args: &[OsString]) -> Flags {
    let mut flags = Flags::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let Some(arg) = arg.to_str() else { break };
        if arg == "--" || arg == "-" || !arg.starts_with('-') {
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            if long == "check-hash-based-pycs" {
                it.next();
            }
            continue;
        }
        let group = &arg[1..];
        for (i, c) in group.char_indices() {
            match c {
                'E' | 'I' if flags.no_env != Some('I') => flags.no_env = Some(c),
                'S' => flags.no_site = true,
                'c' | 'm' => return flags,
                'W' | 'X' => {
                    if group[i + 1..].is_empty() {
                        it.next();
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    flags
}

/// The Python and its options from a script's `#!` line:
/// `#!/usr/bin/python3 -E` (the kernel passes the rest as one argument)
/// or `#!/usr/bin/env [-S] python3 -E`.
fn shebang(program: &OsStr) -> Option<(OsString, Vec<OsString>)> {
    let path = resolve(program)?;
    let mut head = Vec::new();
    std::fs::File::open(path).ok()?.take(SHEBANG_MAX).read_to_end(&mut head).ok()?;
    let line = head.strip_prefix(b"#!")?.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim();
    let (interpreter, rest) = line.split_once([' ', '\t']).unwrap_or((line, ""));
    let rest = rest.trim();
    if Path::new(interpreter).file_name().is_some_and(|n| n == "env") {
        // env's own options and NAME=VALUE settings come first.
        let mut words = rest.split_whitespace().skip_while(|w| w.starts_with('-') || w.contains('='));
        let python = words.next()?;
        let args = words.map(OsString::from).collect();
        return is_python(OsStr::new(python)).then(|| (python.into(), args));
    }
    let args = if rest.is_empty() { Vec::new() } else { vec![OsString::from(rest)] };
    is_python(OsStr::new(interpreter)).then(|| (interpreter.into(), args))
}

/// Where `execvp` would find `program`.
fn resolve(program: &OsStr) -> Option<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(line: &[&str]) -> Flags {
        scan(&line.iter().map(OsString::from).collect::<Vec<_>>())
    }

    fn warn(line: &[&str]) -> Option<String> {
        let args: Vec<OsString> = line[1..].iter().map(OsString::from).collect();
        warning(OsStr::new(line[0]), &args)
    }

    #[test]
    fn pythons_are_recognised_by_name() {
        for yes in ["python", "python3", "python3.12", "/usr/bin/python3.13t", "python2.7"] {
            assert!(is_python(OsStr::new(yes)), "{yes}");
        }
        for no in ["pythonista", "python3-config", "torchrun", "ipython", "python.sh", "python.3"] {
            assert!(!is_python(OsStr::new(no)), "{no}");
        }
    }

    #[test]
    fn flags_are_read_as_python_reads_them() {
        assert_eq!(flags(&["-I", "train.py"]).no_env, Some('I'));
        assert_eq!(flags(&["-sE", "train.py"]).no_env, Some('E'));
        assert_eq!(flags(&["-IS", "train.py"]), Flags { no_env: Some('I'), no_site: true });
        assert_eq!(flags(&["-u", "-S", "-m", "torch.distributed.run"]), Flags { no_env: None, no_site: true });
        assert_eq!(flags(&["-EI"]).no_env, Some('I'), "-I is the stronger");
        assert_eq!(flags(&["-IE"]).no_env, Some('I'));
        // Values of -W and -X, attached or next, are not flags.
        assert_eq!(flags(&["-W", "-E", "x.py"]), Flags::default());
        assert_eq!(flags(&["-WIgnore", "x.py"]), Flags::default());
        assert!(flags(&["-X", "importtime", "-S"]).no_site);
        assert_eq!(flags(&["--check-hash-based-pycs", "never", "-E"]).no_env, Some('E'));
        // Options end at -c, -m, the script, - and --.
        assert_eq!(flags(&["-c", "-E"]), Flags::default());
        assert_eq!(flags(&["-cimport sys", "-E"]), Flags::default());
        assert!(flags(&["-Sc", "pass"]).no_site);
        assert_eq!(flags(&["train.py", "-E"]), Flags::default());
        assert_eq!(flags(&["--", "-E"]), Flags::default());
        assert_eq!(flags(&["-", "-E"]), Flags::default());
        // -s and -P leave PYTHONPATH and sitecustomize alone.
        assert_eq!(flags(&["-s", "-P", "-B", "-u", "train.py"]), Flags::default());
    }

    #[test]
    fn the_warning_says_why_and_how_once() {
        let w = warn(&["python3", "-I", "train.py"]).unwrap();
        assert!(w.starts_with("python3 -I ignores PYTHONPATH"), "{w}");
        assert!(w.contains("import gpuscope_probe; gpuscope_probe.start()") && !w.contains('\n'), "{w}");
        let w = warn(&["/opt/py/bin/python3.12", "-sE", "train.py"]).unwrap();
        assert!(w.starts_with("python3.12 -E ignores PYTHONPATH") && w.contains("drop -E"), "{w}");
        let w = warn(&["python", "-S", "train.py"]).unwrap();
        assert!(w.contains("skips sitecustomize") && w.contains("drop -S"), "{w}");
        assert_eq!(warn(&["python3", "-u", "train.py", "-I"]), None);
        assert_eq!(warn(&["torchrun", "--nproc-per-node", "8", "-I"]), None);
    }

    #[test]
    fn a_scripts_shebang_counts() {
        let dir = tempfile::tempdir().unwrap();
        let script = |name: &str, line: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, format!("{line}\nprint(1)\n")).unwrap();
            p.into_os_string()
        };
        let direct = script("direct.py", "#!/usr/bin/python3 -E");
        let w = warning(&direct, &[]).unwrap();
        assert!(w.starts_with("python3 -E (the #! line of") && w.contains("direct.py"), "{w}");
        let env = script("env.py", "#!/usr/bin/env -S python3 -I -u");
        assert!(warning(&env, &[]).unwrap().starts_with("python3 -I"));
        assert_eq!(warning(&script("plain.py", "#!/usr/bin/env python3"), &[]), None);
        assert_eq!(warning(&script("sh.sh", "#!/bin/sh -e"), &[]), None);
        assert_eq!(warning(&script("none.py", "print(2)"), &[]), None);
    }
}
