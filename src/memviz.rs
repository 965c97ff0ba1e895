//! `gpuscope memviz PID`: asks a probed PyTorch process for the snapshot
//! PyTorch's memory viewer opens. gpuscope never takes it itself: it
//! leaves a request beside the process's probe file, in the private probe
//! directory; the probe, inside the process, reads it at its next wake-up
//! (at most once a second), calls `torch.cuda.memory._dump_snapshot` (after
//! recording allocation history for a while, if asked), and answers.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::dirfd::{DirFd, random_hex};
use crate::sources::probe::{ProbeDir, ProbeFile, current_uid, default_dir};
use crate::sources::procstat;

#[derive(Debug, thiserror::Error)]
pub enum MemvizError {
    #[error("no process {0}")]
    NoProcess(u32),
    #[error(
        "process {pid} belongs to uid {owner}: only its owner can ask its probe (as that user, run gpuscope memviz)"
    )]
    Foreign { pid: u32, owner: u32 },
    #[error(
        "process {pid} has no gpuscope probe in {dir} (start it under `gpuscope run`, or `import gpuscope_probe; \
         gpuscope_probe.start()`; a process in a container answers only inside it)"
    )]
    NoProbe { pid: u32, dir: String },
    #[error("the probe directory: {0}")]
    Dir(String),
    #[error("process {pid}'s probe: {why}")]
    Probe { pid: u32, why: String },
    #[error("process {pid}'s probe did not answer within {waited:?} (is it still sampling?)")]
    Timeout { pid: u32, waited: Duration },
    #[error("{path}: {why}")]
    Output { path: PathBuf, why: String },
}

impl MemvizError {
    /// Refusals are exit 2, like bad usage; a probe that fails or never
    /// answers is exit 1.
    pub fn refused(&self) -> bool {
        matches!(
            self,
            Self::NoProcess(_) | Self::Foreign { .. } | Self::NoProbe { .. } | Self::Dir(_) | Self::Output { .. }
        )
    }
}

#[derive(Debug, Deserialize)]
struct Answer {
    id: Option<String>,
    state: String,
    file: Option<String>,
    error: Option<String>,
}

/// Where the snapshot is once the probe has written it (and copied, with
/// `output`).
pub fn run(pid: u32, output: Option<&Path>, history: Option<Duration>) -> Result<PathBuf, MemvizError> {
    let owner = std::fs::metadata(format!("/proc/{pid}")).map_err(|_| MemvizError::NoProcess(pid))?.uid();
    if owner != current_uid() {
        return Err(MemvizError::Foreign { pid, owner });
    }
    let ticks = procstat::start_ticks(Path::new("/proc"), pid).ok_or(MemvizError::NoProcess(pid))?;
    if let Some(path) = output.filter(|p| std::fs::symlink_metadata(p).is_ok()) {
        return Err(MemvizError::Output {
            path: path.into(),
            why: "already exists; gpuscope does not overwrite it".into(),
        });
    }
    let probe_dir = ProbeDir::new(default_dir());
    let shown = probe_dir.path.display().to_string();
    match probe_dir.check() {
        Ok(true) => {}
        Ok(false) => return Err(MemvizError::NoProbe { pid, dir: shown }),
        Err(e) => return Err(MemvizError::Dir(e.to_string())),
    }
    let dir = DirFd::open_nofollow(&probe_dir.path).map_err(|e| MemvizError::Dir(format!("{shown}: {e}")))?;
    let stem = format!("{pid}-{ticks}");
    let interval =
        probe_interval(&dir, &stem, pid, ticks).ok_or_else(|| MemvizError::NoProbe { pid, dir: shown.clone() })?;
    let id = random_hex();
    ask(&dir, &stem, &id, history)
        .map_err(|e| MemvizError::Dir(format!("cannot leave the request in {shown}: {e}")))?;
    // The probe looks at its next wake-up: within its interval, or a
    // second; then the history, then the dump itself.
    let patience = interval + history.unwrap_or_default() + Duration::from_secs(15);
    let file = wait(&dir, &stem, &id, pid, patience)?;
    let made = probe_dir.path.join(&file);
    let Some(output) = output else { return Ok(made) };
    copy_out(&dir, &file, output)?;
    // Asked for by this run and copied: the probe directory's copies go.
    let _ = dir.unlink(OsStr::new(&file));
    let _ = dir.unlink(OsStr::new(&format!("{stem}.memviz.json")));
    Ok(output.to_path_buf())
}

/// The probe's interval, from its file: proof that this very process
/// (PID and start time) runs a probe here.
fn probe_interval(dir: &DirFd, stem: &str, pid: u32, ticks: u64) -> Option<Duration> {
    let mut text = String::new();
    let file = dir.open_file(OsStr::new(&format!("{stem}.json"))).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.uid() != current_uid() {
        return None;
    }
    file.take(64 * 1024).read_to_string(&mut text).ok()?;
    let parsed = ProbeFile::parse(&text, pid, ticks).ok()?;
    Some(Duration::from_secs_f64(parsed.interval_s.clamp(0.1, 60.0)))
}

fn ask(dir: &DirFd, stem: &str, id: &str, history: Option<Duration>) -> std::io::Result<()> {
    let request = serde_json::json!({
        "kind": "memviz", "id": id, "history_s": history.map(|h| h.as_secs_f64()),
    });
    let temp = format!(".{stem}.request.{}.tmp", random_hex());
    let mut file = dir.create_new(OsStr::new(&temp), 0o600)?;
    file.write_all(request.to_string().as_bytes())?;
    drop(file);
    dir.rename(OsStr::new(&temp), OsStr::new(&format!("{stem}.request")))
}

fn wait(dir: &DirFd, stem: &str, id: &str, pid: u32, patience: Duration) -> Result<String, MemvizError> {
    let started = Instant::now();
    let mut told = false;
    let answer_name = format!("{stem}.memviz.json");
    while started.elapsed() < patience {
        if let Some(answer) = read_answer(dir, &answer_name).filter(|a| a.id.as_deref() == Some(id)) {
            match answer.state.as_str() {
                "done" => {
                    return answer
                        .file
                        .filter(|f| is_plain_name(f, stem))
                        .ok_or_else(|| MemvizError::Probe { pid, why: "answered without a snapshot file".into() });
                }
                "error" => {
                    return Err(MemvizError::Probe { pid, why: answer.error.unwrap_or_else(|| "failed".into()) });
                }
                _ if !told => {
                    eprintln!("gpuscope: process {pid} is recording its allocation history...");
                    told = true;
                }
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(MemvizError::Timeout { pid, waited: patience })
}

fn read_answer(dir: &DirFd, name: &str) -> Option<Answer> {
    let file = dir.open_file(OsStr::new(name)).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.uid() != current_uid() {
        return None;
    }
    let mut text = String::new();
    file.take(4096).read_to_string(&mut text).ok()?;
    serde_json::from_str(&text).ok()
}

/// The probe names its snapshot `<pid>-<ticks>.memviz.pickle`; anything
/// else (a path, another name) is not followed.
fn is_plain_name(name: &str, stem: &str) -> bool {
    name == format!("{stem}.memviz.pickle")
}

fn copy_out(dir: &DirFd, name: &str, output: &Path) -> Result<(), MemvizError> {
    let err = |why: String| MemvizError::Output { path: output.to_path_buf(), why };
    let mut from = dir.open_file(OsStr::new(name)).map_err(|e| err(format!("cannot read the snapshot: {e}")))?;
    let mut to =
        std::fs::OpenOptions::new().write(true).create_new(true).open(output).map_err(|e| err(e.to_string()))?;
    std::io::copy(&mut from, &mut to).map_err(|e| err(e.to_string()))?;
    Ok(())
}
