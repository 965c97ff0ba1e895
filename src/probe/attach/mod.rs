//! `gpuscope attach PID`: starts the probe inside a Python process that is
//! already running, where the interpreter offers a safe way. Python 3.14's
//! `sys.remote_exec(pid, script)` (PEP 768) runs a script in the target at
//! its next safe point, in its main thread; gpuscope hands it a short
//! script that imports the embedded probe from a private, verified
//! directory and starts it, under every rule of an ordinary start (no
//! thread until CUDA is up, files only in the user's private directory).
//! Older interpreters offer no safe way: gpuscope says a restart under
//! `gpuscope run` (or `import gpuscope_probe`) is needed, and never reaches
//! for a debugger.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::probe::inject::{self, InjectError};
use crate::util::current_uid;
use crate::util::dirfd::DirFd;
use crate::util::own_files::{self, Payload};

mod interpreter;

pub use interpreter::{libpython_version, parse_version};

#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("no process {0}")]
    NoProcess(u32),
    #[error("process {pid} belongs to uid {owner}: only its owner or root can attach to it")]
    Foreign { pid: u32, owner: u32 },
    #[error("process {pid} ({exe}) is not a Python interpreter gpuscope can recognise")]
    NotPython { pid: u32, exe: String },
    #[error(
        "process {pid} runs Python {version}, which has no safe way to start code in a running process \
         (sys.remote_exec arrived in 3.14): restart it under `gpuscope run -- ...`, or add \
         `import gpuscope_probe; gpuscope_probe.start()` to it"
    )]
    TooOld { pid: u32, version: String },
    #[error(
        "as root, gpuscope runs only a root-owned interpreter that nobody else can change; {exe} is not one: {why}"
    )]
    UntrustedInterpreter { exe: String, why: String },
    #[error(transparent)]
    Place(#[from] InjectError),
    #[error("cannot write the attach script: {0}")]
    Script(std::io::Error),
    #[error("sys.remote_exec failed: {0}")]
    RemoteExec(String),
}

impl AttachError {
    /// Refusals (exit 2), as opposed to an attempt that failed (exit 1).
    pub fn refused(&self) -> bool {
        !matches!(self, Self::RemoteExec(_) | Self::Script(_))
    }
}

/// The process's Python, read from `/proc` without running anything of
/// its: the file it runs, held open, and the version that file declares.
#[derive(Debug)]
pub struct Target {
    pub pid: u32,
    pub uid: u32,
    /// The path `/proc` shows, for messages; never opened again by name.
    pub exe: PathBuf,
    /// `/proc/PID/exe` opened once: the very file the kernel runs.
    interpreter: File,
    /// From the interpreter's own bytes (`interpreter::version_of`).
    pub version: Option<(u32, u32)>,
    /// What the executable's name or a mapped library's name suggests:
    /// only ever used to explain a refusal.
    named: Option<(u32, u32)>,
}

pub fn inspect(proc_root: &Path, pid: u32) -> Result<Target, AttachError> {
    use std::os::unix::fs::MetadataExt;
    let base = proc_root.join(pid.to_string());
    let uid = std::fs::metadata(&base).map_err(|_| AttachError::NoProcess(pid))?.uid();
    let me = current_uid();
    if uid != me && me != 0 {
        return Err(AttachError::Foreign { pid, owner: uid });
    }
    let exe = std::fs::read_link(base.join("exe")).map_err(|_| AttachError::NoProcess(pid))?;
    let interpreter = File::open(base.join("exe")).map_err(|_| AttachError::NoProcess(pid))?;
    let maps = std::fs::read_to_string(base.join("maps")).unwrap_or_default();
    let version = interpreter::version_of(&interpreter);
    let named = python_version(&exe, &maps);
    if version.is_none() && named.is_none() {
        return Err(AttachError::NotPython { pid, exe: exe.display().to_string() });
    }
    Ok(Target { pid, uid, exe, interpreter, version, named })
}

/// `python3.14` as the executable's name, or the `libpython3.14` it has
/// mapped (a `python3` linked against it). Names prove nothing: this only
/// words a refusal.
pub fn python_version(exe: &Path, maps: &str) -> Option<(u32, u32)> {
    let name = exe.file_name()?.to_string_lossy().into_owned();
    let from_name = name.strip_prefix("python").and_then(parse_version);
    let from_maps = || maps.lines().find_map(|l| libpython_version(l.rsplit('/').next()?));
    from_name.or_else(from_maps)
}

/// The script the interpreter runs in the target: the probe from `dir`.
pub fn script(dir: &Path) -> String {
    let dir = dir.display().to_string().replace('\\', "\\\\").replace('\'', "\\'");
    format!(
        "{SCRIPT_MARKER}: starts the allocator probe in this process.\n\
         import sys\n\
         if '{dir}' not in sys.path:\n    sys.path.insert(0, '{dir}')\n\
         import gpuscope_probe\n\
         gpuscope_probe.start()\n"
    )
}

/// `sys.remote_exec` arrived in Python 3.14 (PEP 768). Only the version
/// the interpreter's file declares lets gpuscope run it; a name alone can
/// explain why not.
pub fn supported(target: &Target) -> Result<(), AttachError> {
    let too_old =
        |(major, minor): (u32, u32)| AttachError::TooOld { pid: target.pid, version: format!("{major}.{minor}") };
    match (target.version, target.named) {
        (Some(v), _) if v >= (3, 14) => Ok(()),
        (Some(v), _) => Err(too_old(v)),
        (None, Some(v)) if v < (3, 14) => Err(too_old(v)),
        (None, _) => Err(AttachError::NotPython { pid: target.pid, exe: target.exe.display().to_string() }),
    }
}

/// Where the probe and the attach script were written.
pub struct Prepared {
    pub script: PathBuf,
    /// Root's fresh directory for another user's process: removed unless
    /// the attach went through (the target reads it at its next safe
    /// point, after gpuscope has exited).
    fresh: Option<tempfile::TempDir>,
}

impl Prepared {
    /// Leaves the files for the target to read.
    pub fn keep(self) -> PathBuf {
        if let Some(dir) = self.fresh {
            let _ = dir.keep();
        }
        self.script
    }
}

/// How the attach script begins, so that `own_files::write_ours` knows an
/// older one as gpuscope's.
const SCRIPT_MARKER: &str = "# gpuscope attach";

/// Writes the probe and the attach script where the target's user can
/// read them and nobody else can change them.
pub fn prepare(target: &Target) -> Result<Prepared, AttachError> {
    if target.uid != current_uid() {
        return prepare_for_other();
    }
    let probe = inject::probe_path()?;
    let dir = probe.parent().map(Path::to_path_buf).unwrap_or_default();
    let name = format!("attach-{}.py", target.pid);
    let text = script(&dir);
    let placed = DirFd::open_nofollow(&dir).map_err(AttachError::Script)?;
    let payload = Payload { name: &name, text: &text, marker: SCRIPT_MARKER, mode: 0o600 };
    own_files::write_ours(&placed, &payload).map_err(|e| AttachError::Script(std::io::Error::other(e)))?;
    Ok(Prepared { script: dir.join(name), fresh: None })
}

/// Root attaching to another user's process: a fresh directory of root's
/// that the user can read and not change, holding the probe (the text the
/// binary embeds) and the script. Nothing in it is handed to the user, so
/// removing it after a failure removes only root's own files.
fn prepare_for_other() -> Result<Prepared, AttachError> {
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let fresh = tempfile::Builder::new().prefix("gpuscope-attach-").tempdir().map_err(AttachError::Script)?;
    let dir = DirFd::open_nofollow(fresh.path()).map_err(AttachError::Script)?;
    let owner = dir.metadata().map_err(AttachError::Script)?.uid();
    if owner != current_uid() {
        let why = format!("{} belongs to uid {owner}", fresh.path().display());
        return Err(AttachError::Script(std::io::Error::other(why)));
    }
    // Made by this process a moment ago; the umask may have narrowed the
    // mode tempfile asked for, so it is set through the descriptor.
    dir.set_mode(0o755).map_err(AttachError::Script)?;
    let text = script(fresh.path());
    for (name, text) in [("gpuscope_probe.py", inject::PROBE_PY), ("attach.py", text.as_str())] {
        let mut file = dir.create_new(OsStr::new(name), 0o644).map_err(AttachError::Script)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o644)).map_err(AttachError::Script)?;
        file.write_all(text.as_bytes()).map_err(AttachError::Script)?;
    }
    Ok(Prepared { script: fresh.path().join("attach.py"), fresh: Some(fresh) })
}

/// Starts the probe in `pid`. Every check comes before anything is
/// written, so a refusal leaves nothing behind.
pub fn start(pid: u32) -> Result<(), AttachError> {
    let target = inspect(Path::new("/proc"), pid)?;
    supported(&target)?;
    let argv0 = launch_as(&target)?;
    let prepared = prepare(&target)?;
    remote_exec(&target, &argv0, &prepared.script)?;
    prepared.keep();
    Ok(())
}

/// The path the interpreter is started as (its `argv[0]`, from which
/// Python finds its standard library). A user attaching to their own
/// process runs their own interpreter; root runs only a root-owned one
/// reached through root-owned directories (`interpreter::trusted_path`).
fn launch_as(target: &Target) -> Result<PathBuf, AttachError> {
    if current_uid() != 0 {
        return Ok(target.exe.clone());
    }
    let untrusted = |why: String| AttachError::UntrustedInterpreter { exe: target.exe.display().to_string(), why };
    let held = target.interpreter.metadata().map_err(|e| untrusted(e.to_string()))?;
    interpreter::trusted_path(&target.exe, interpreter::Node::of(&held), interpreter::lstat).map_err(untrusted)
}

/// Runs `sys.remote_exec` in the target's interpreter, through the file
/// held open since `inspect`: `/proc/self/fd/N` is what glibc's `fexecve`
/// executes, so no name is looked up again between check and use. The
/// descriptor is close-on-exec, which an ELF interpreter does not mind and
/// which makes a script (`#!`) fail rather than be run by name. `-I -S`:
/// no environment variables, user site or `site` import (a `.pth` file
/// would be code), and `/` as the working directory.
fn remote_exec(target: &Target, argv0: &Path, script: &Path) -> Result<(), AttachError> {
    let code = format!("import sys; sys.remote_exec({}, sys.argv[1])", target.pid);
    let held = format!("/proc/self/fd/{}", target.interpreter.as_raw_fd());
    let out = Command::new(&held)
        .arg0(argv0)
        .args(["-I", "-S", "-c", &code])
        .arg(script)
        .current_dir("/")
        .output()
        .map_err(|e| AttachError::RemoteExec(format!("cannot run {}: {e}", target.exe.display())))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(AttachError::RemoteExec(String::from_utf8_lossy(&out.stderr).trim().to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_comes_from_the_name_or_the_mapped_library() {
        assert_eq!(python_version(Path::new("/usr/bin/python3.14"), ""), Some((3, 14)));
        assert_eq!(python_version(Path::new("/usr/bin/python3.13t"), ""), Some((3, 13)));
        let maps = "7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libpython3.12.so.1.0\n";
        assert_eq!(python_version(Path::new("/opt/venv/bin/python3"), maps), Some((3, 12)));
        assert_eq!(python_version(Path::new("/usr/bin/python3"), ""), None, "not a guess");
        assert_eq!(python_version(Path::new("/usr/bin/sleep"), ""), None);
    }

    #[test]
    fn the_script_starts_the_probe_from_its_directory() {
        let s = script(Path::new("/run/user/1000/gpuscope/python"));
        assert!(s.contains("sys.path.insert(0, '/run/user/1000/gpuscope/python')"));
        assert!(s.ends_with("gpuscope_probe.start()\n"));
        assert!(script(Path::new("/tmp/it's")).contains("it\\'s"));
    }
}
