//! Getting the allocator probe into training processes: `gpuscope run`
//! (a `sitecustomize` on `PYTHONPATH`, no code change), `gpuscope probe
//! path` and `gpuscope probe install` (for `import gpuscope_probe`).
//! `place.rs` decides where the files go and never writes through a link
//! or into a directory gpuscope did not make; `python_flags.rs` spots the
//! Python command lines on which the probe cannot start.

pub(crate) mod place;
mod python_flags;
pub mod supervise;

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::exit;
use crate::util::dirfd::DirFd;
use crate::util::own_files::{self, Payload};
use place::{PROBE_MARKER, SITE_MARKER};

use crate::probe::files::{ProbeDir, default_dir};

pub const PROBE_PY: &str = include_str!("../../../assets/gpuscope_probe.py");
pub const SITECUSTOMIZE_PY: &str = include_str!("../../../assets/sitecustomize.py");

const PROBE: Payload = Payload { name: "gpuscope_probe.py", text: PROBE_PY, marker: PROBE_MARKER, mode: 0o600 };
const SITE: Payload = Payload { name: "sitecustomize.py", text: SITECUSTOMIZE_PY, marker: SITE_MARKER, mode: 0o600 };

#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    #[error("cannot write the probe: {0}")]
    Place(String),
    #[error("cannot install the probe: {0}")]
    Install(String),
    #[error("cannot run {program}: {source}")]
    Exec { program: String, source: io::Error },
    #[error("cannot ask {python} where its site-packages are: {reason}")]
    Python { python: String, reason: String },
}

impl InjectError {
    /// Shell conventions for a command that could not be started.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Exec { source, .. } if source.kind() == io::ErrorKind::NotFound => exit::NOT_FOUND,
            Self::Exec { .. } => exit::CANNOT_EXECUTE,
            Self::Place(_) | Self::Install(_) | Self::Python { .. } => exit::USAGE,
        }
    }
}

/// `gpuscope probe path`: writes the probe and its `sitecustomize` where
/// `run` would, and returns the probe's path; a warning, if any, goes to
/// stderr.
pub fn probe_path() -> Result<PathBuf, InjectError> {
    let placed = place::place(&[PROBE, SITE]).map_err(InjectError::Place)?;
    if let Some(w) = placed.warning {
        crate::output::stderr::say!("gpuscope: {w}");
    }
    Ok(placed.dir.join(PROBE.name))
}

/// `gpuscope run -- CMD...`: CMD with the probe first on `PYTHONPATH`, to
/// be started by `supervise::spawn`. Nothing about the probe stops CMD: at
/// worst it runs without it, and stderr says so in one line.
pub fn command(command: &[OsString]) -> Result<Command, InjectError> {
    let Some((program, args)) = command.split_first() else {
        let source = io::Error::new(io::ErrorKind::InvalidInput, "no command given");
        return Err(InjectError::Exec { program: String::new(), source });
    };
    let mut cmd = Command::new(program);
    cmd.args(args);
    for line in prepare(program, args, &mut cmd) {
        crate::output::stderr::say!("gpuscope: {line}");
    }
    Ok(cmd)
}

/// `gpuscope run --no-report`'s way: replaces this process with CMD.
/// Returns only if CMD could not be started.
pub fn exec(mut cmd: Command) -> InjectError {
    let source = cmd.exec();
    start_failed(&cmd, source)
}

/// CMD could not be started: the error `exit_code` maps to the shells'.
pub fn start_failed(cmd: &Command, source: io::Error) -> InjectError {
    InjectError::Exec { program: cmd.get_program().to_string_lossy().into_owned(), source }
}

/// Sets `PYTHONPATH` on `cmd` when the probe could be placed; returns the
/// lines to tell the user.
fn prepare(program: &OsStr, args: &[OsString], cmd: &mut Command) -> Vec<String> {
    let mut lines: Vec<String> = python_flags::warning(program, args).into_iter().collect();
    match place::place(&[PROBE, SITE]) {
        Ok(placed) => {
            lines.extend(placed.warning);
            cmd.env("PYTHONPATH", python_path(&placed.dir, std::env::var_os("PYTHONPATH")));
            // The probe refuses an unsafe directory for its figures too:
            // say so now rather than leave the dashboard empty.
            if let Err(e) = ProbeDir::new(default_dir()).check() {
                lines.push(format!("the probe will not publish its figures: {e}"));
            }
        }
        Err(why) => lines.push(format!("{why}; running the command without the allocator probe")),
    }
    lines
}

fn python_path(dir: &Path, existing: Option<OsString>) -> OsString {
    let mut path = OsString::from(dir.as_os_str());
    if let Some(existing) = existing.filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(existing);
    }
    path
}

/// `gpuscope probe install`: copies the probe where `python` imports from:
/// its user site, or the environment's own site-packages when the user
/// site is off (as in a virtualenv). A `gpuscope_probe.py` already there
/// is replaced only if it is a gpuscope probe of this user's.
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
    // The user site may not exist yet; making it (as pip --user does)
    // changes nothing that was there.
    std::fs::create_dir_all(&site)
        .map_err(|e| InjectError::Install(format!("cannot create {}: {e}", site.display())))?;
    let dir = DirFd::open(&site).map_err(|e| InjectError::Install(format!("cannot open {}: {e}", site.display())))?;
    let installed = Payload { mode: 0o644, ..PROBE };
    own_files::write_ours(&dir, &installed).map_err(InjectError::Install)?;
    Ok(site.join(PROBE.name))
}

/// `gpuscope probe install --target DIR`: the probe and its
/// `sitecustomize` shim, readable by every user (an image's processes may
/// run as anyone), into a directory the caller names; files of that name
/// that gpuscope did not write are left alone, with an error.
pub fn install_into(dir: &Path) -> Result<PathBuf, InjectError> {
    std::fs::create_dir_all(dir).map_err(|e| InjectError::Install(format!("cannot create {}: {e}", dir.display())))?;
    let opened = DirFd::open(dir).map_err(|e| InjectError::Install(format!("cannot open {}: {e}", dir.display())))?;
    for payload in [PROBE, SITE] {
        own_files::write_ours(&opened, &Payload { mode: 0o644, ..payload }).map_err(InjectError::Install)?;
    }
    Ok(dir.join(PROBE.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_files_carry_their_markers() {
        // How an older copy is recognised as gpuscope's: changing the first
        // line of either file would make gpuscope refuse to update it.
        assert!(PROBE_PY.starts_with(PROBE_MARKER));
        assert!(SITECUSTOMIZE_PY.starts_with(SITE_MARKER));
    }

    #[test]
    fn the_probe_goes_first_on_pythonpath() {
        let dir = Path::new("/run/user/1/gpuscope/python");
        assert_eq!(python_path(dir, None), OsString::from("/run/user/1/gpuscope/python"));
        assert_eq!(python_path(dir, Some("".into())), OsString::from("/run/user/1/gpuscope/python"));
        assert_eq!(python_path(dir, Some("/a:/b".into())), OsString::from("/run/user/1/gpuscope/python:/a:/b"));
    }

    #[test]
    fn exec_failure_maps_to_shell_codes() {
        let missing = OsStr::new("/nonexistent/gpuscope-test-cmd");
        let e = exec(Command::new(missing));
        assert_eq!(e.exit_code(), 127, "{e}");
        let not_executable = OsStr::new("/");
        assert_eq!(exec(Command::new(not_executable)).exit_code(), 126);
        assert_eq!(command(&[]).unwrap_err().exit_code(), 126);
    }
}
