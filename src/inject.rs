//! Getting the allocator probe into training processes: `gpuscope run`
//! (a `sitecustomize` on `PYTHONPATH`, no code change), `gpuscope probe
//! path` and `gpuscope probe install` (for `import gpuscope_probe`).

use std::ffi::OsString;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::sources::probe::default_dir;

pub const PROBE_PY: &str = include_str!("../assets/gpuscope_probe.py");
pub const SITECUSTOMIZE_PY: &str = include_str!("../assets/sitecustomize.py");

#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    #[error("cannot write the probe to {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("cannot run {program}: {source}")]
    Exec { program: String, source: io::Error },
    #[error("cannot ask {python} where its site-packages are: {reason}")]
    Python { python: String, reason: String },
}

impl InjectError {
    /// Shell conventions for a command that could not be started.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Exec { source, .. } if source.kind() == io::ErrorKind::NotFound => 127,
            Self::Exec { .. } => 126,
            Self::Write { .. } | Self::Python { .. } => 2,
        }
    }
}

/// The probe's own directory beside the probes' data:
/// `$XDG_RUNTIME_DIR/gpuscope/python` (or `/tmp/gpuscope-UID/python`).
pub fn python_dir() -> PathBuf {
    let data = default_dir();
    data.parent().map_or_else(|| data.join("python"), |base| base.join("python"))
}

/// Writes the probe and its `sitecustomize` into `dir` (private to this
/// user) and returns the probe's path. Files are replaced atomically, so a
/// Python starting at that moment never imports half a file.
pub fn materialize(dir: &Path) -> Result<PathBuf, InjectError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| InjectError::Write { path, source }
    };
    std::fs::create_dir_all(dir).map_err(err(dir))?;
    if let Some(parent) = dir.parent() {
        std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o700)).map_err(err(parent))?;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(err(dir))?;
    for (name, text) in [("gpuscope_probe.py", PROBE_PY), ("sitecustomize.py", SITECUSTOMIZE_PY)] {
        write_if_changed(&dir.join(name), text).map_err(err(&dir.join(name)))?;
    }
    Ok(dir.join("gpuscope_probe.py"))
}

fn write_if_changed(path: &Path, text: &str) -> io::Result<()> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// `gpuscope run -- CMD...`: replaces this process with CMD, with the probe
/// first on `PYTHONPATH`. Returns only if CMD could not be started.
pub fn run(command: &[OsString]) -> InjectError {
    run_from(&python_dir(), command)
}

fn run_from(dir: &Path, command: &[OsString]) -> InjectError {
    if let Err(e) = materialize(dir) {
        return e;
    }
    let mut path = OsString::from(dir.as_os_str());
    if let Some(existing) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(existing);
    }
    let (program, args) = command.split_first().expect("clap requires a command");
    let source = Command::new(program).args(args).env("PYTHONPATH", path).exec();
    InjectError::Exec { program: program.to_string_lossy().into_owned(), source }
}

/// `gpuscope probe install`: copies the probe where `python` imports from:
/// its user site, or the environment's own site-packages when the user
/// site is off (as in a virtualenv).
pub fn install(python: &Path) -> Result<PathBuf, InjectError> {
    const ASK: &str = "import site, sysconfig\n\
        print(site.getusersitepackages() if site.ENABLE_USER_SITE else sysconfig.get_paths()['purelib'])";
    let python_name = python.display().to_string();
    let out = Command::new(python)
        .args(["-c", ASK])
        .output()
        .map_err(|e| InjectError::Python { python: python_name.clone(), reason: e.to_string() })?;
    if !out.status.success() {
        let reason = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(InjectError::Python { python: python_name, reason });
    }
    let site = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let target = site.join("gpuscope_probe.py");
    let err = |source| InjectError::Write { path: target.clone(), source };
    std::fs::create_dir_all(&site).map_err(err)?;
    write_if_changed(&target, PROBE_PY).map_err(err)?;
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn materialize_writes_a_private_importable_copy() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("gpuscope").join("python");
        let probe = materialize(&dir).unwrap();
        assert_eq!(std::fs::read_to_string(&probe).unwrap(), PROBE_PY);
        assert_eq!(std::fs::read_to_string(dir.join("sitecustomize.py")).unwrap(), SITECUSTOMIZE_PY);
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // Idempotent.
        assert_eq!(materialize(&dir).unwrap(), probe);
    }

    #[test]
    fn exec_failure_maps_to_shell_codes() {
        let root = tempfile::tempdir().unwrap();
        let e = run_from(&root.path().join("python"), &["/nonexistent/gpuscope-test-cmd".into()]);
        assert_eq!(e.exit_code(), 127, "{e}");
    }
}
