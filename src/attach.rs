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

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::inject::{self, InjectError};
use crate::sources::probe::current_uid;

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
    #[error("as root, gpuscope runs only a root-owned interpreter that nobody else can change; {0} is not one")]
    UntrustedInterpreter(String),
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

/// The process's Python: its executable and version, read from `/proc`
/// without running anything of its.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub pid: u32,
    pub uid: u32,
    pub exe: PathBuf,
    pub version: (u32, u32),
}

pub fn inspect(proc_root: &Path, pid: u32) -> Result<Target, AttachError> {
    let base = proc_root.join(pid.to_string());
    let uid = std::fs::metadata(&base).map_err(|_| AttachError::NoProcess(pid))?.uid();
    let me = current_uid();
    if uid != me && me != 0 {
        return Err(AttachError::Foreign { pid, owner: uid });
    }
    let exe = std::fs::read_link(base.join("exe")).map_err(|_| AttachError::NoProcess(pid))?;
    let maps = std::fs::read_to_string(base.join("maps")).unwrap_or_default();
    let shown = exe.display().to_string();
    let version = python_version(&exe, &maps).ok_or(AttachError::NotPython { pid, exe: shown })?;
    Ok(Target { pid, uid, exe, version })
}

/// `python3.14` as the executable's name, or the `libpython3.14` it has
/// mapped (a `python3` linked against it).
pub fn python_version(exe: &Path, maps: &str) -> Option<(u32, u32)> {
    let name = exe.file_name()?.to_string_lossy().into_owned();
    let from_name = name.strip_prefix("python").and_then(parse_version);
    let from_maps = || {
        maps.lines().find_map(|l| {
            let lib = l.rsplit('/').next()?;
            let rest = lib.strip_prefix("libpython")?;
            parse_version(rest.split(".so").next()?)
        })
    };
    from_name.or_else(from_maps)
}

fn parse_version(text: &str) -> Option<(u32, u32)> {
    let text = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let (major, minor) = text.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The script the interpreter runs in the target: the probe from `dir`.
pub fn script(dir: &Path) -> String {
    let dir = dir.display().to_string().replace('\\', "\\\\").replace('\'', "\\'");
    format!(
        "# gpuscope attach: starts the allocator probe in this process.\n\
         import sys\n\
         if '{dir}' not in sys.path:\n    sys.path.insert(0, '{dir}')\n\
         import gpuscope_probe\n\
         gpuscope_probe.start()\n"
    )
}

/// `sys.remote_exec` arrived in Python 3.14 (PEP 768).
pub fn supported(target: &Target) -> Result<(), AttachError> {
    if target.version < (3, 14) {
        return Err(AttachError::TooOld {
            pid: target.pid,
            version: format!("{}.{}", target.version.0, target.version.1),
        });
    }
    Ok(())
}

/// Writes the probe and the attach script where the target's user can
/// read them and nobody else can change them; returns the script's path.
pub fn prepare(target: &Target) -> Result<PathBuf, AttachError> {
    let probe = inject::probe_path()?;
    let dir = probe.parent().map(Path::to_path_buf).unwrap_or_default();
    if target.uid != current_uid() {
        return prepare_for_other(target, &dir);
    }
    let path = dir.join(format!("attach-{}.py", target.pid));
    write_private(&path, &script(&dir)).map_err(AttachError::Script)?;
    Ok(path)
}

/// Root attaching to another user's process: a fresh directory made here,
/// given to that user, holding a copy of the probe and the script.
fn prepare_for_other(target: &Target, ours: &Path) -> Result<PathBuf, AttachError> {
    let fresh = tempfile::Builder::new().prefix("gpuscope-attach-").tempdir().map_err(AttachError::Script)?;
    let dir = fresh.keep();
    let probe = std::fs::read(ours.join("gpuscope_probe.py")).map_err(AttachError::Script)?;
    let script_path = dir.join("attach.py");
    let give = |path: &Path| std::os::unix::fs::chown(path, Some(target.uid), None);
    std::fs::write(dir.join("gpuscope_probe.py"), probe).map_err(AttachError::Script)?;
    write_private(&script_path, &script(&dir)).map_err(AttachError::Script)?;
    for path in [dir.join("gpuscope_probe.py"), script_path.clone(), dir.clone()] {
        give(&path).map_err(AttachError::Script)?;
    }
    Ok(script_path)
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    file.write_all(text.as_bytes())
}

/// Starts the probe in `pid`: refused before anything is written where the
/// interpreter offers no safe way in.
pub fn start(pid: u32) -> Result<(), AttachError> {
    let target = inspect(Path::new("/proc"), pid)?;
    supported(&target)?;
    let script = prepare(&target)?;
    remote_exec(&target, &script)
}

/// Runs `sys.remote_exec` from the target's own interpreter (as root only
/// when that interpreter is root's and closed to changes by others).
pub fn remote_exec(target: &Target, script: &Path) -> Result<(), AttachError> {
    supported(target)?;
    if current_uid() == 0 {
        let m = std::fs::metadata(&target.exe).map_err(|_| AttachError::NoProcess(target.pid))?;
        if m.uid() != 0 || m.mode() & 0o022 != 0 {
            return Err(AttachError::UntrustedInterpreter(target.exe.display().to_string()));
        }
    }
    let code = format!("import sys; sys.remote_exec({}, sys.argv[1])", target.pid);
    let out = Command::new(&target.exe)
        .args(["-I", "-c", &code])
        .arg(script)
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
