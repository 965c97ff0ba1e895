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
use serde::de::DeserializeOwned;

use crate::probe::files::{ProbeDir, ProbeFile, default_dir};
use crate::sources::procstat;
use crate::util::current_uid;
use crate::util::dirfd::{DirFd, random_hex};

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
    #[error(
        "process {pid} ({exe}) is not a Python interpreter gpuscope can recognise: only a Python job runs \
         gpuscope's probe"
    )]
    NotPython { pid: u32, exe: String },
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
            Self::NoProcess(_)
                | Self::Foreign { .. }
                | Self::NoProbe { .. }
                | Self::NotPython { .. }
                | Self::Dir(_)
                | Self::Output { .. }
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

/// A line to one process's probe: proof that this very process (PID and
/// start time) runs a probe in this user's verified probe directory, and
/// the directory, held open, where requests and answers pass.
pub struct ProbeChannel {
    pub pid: u32,
    dir: DirFd,
    stem: String,
    /// The probe's own interval: it looks for requests at its wake-ups.
    pub interval: Duration,
    pub shown: String,
    pub path: PathBuf,
}

/// No probe: advice on starting one fits a Python process only, and
/// `attach`'s own check tells (the same words for the same process).
fn no_probe(pid: u32, dir: String) -> MemvizError {
    match crate::probe::attach::inspect(Path::new("/proc"), pid) {
        Err(crate::probe::attach::AttachError::NotPython { pid, exe }) => MemvizError::NotPython { pid, exe },
        _ => MemvizError::NoProbe { pid, dir },
    }
}

impl ProbeChannel {
    /// Refusals (another user's process, no probe) name the problem.
    pub fn open(pid: u32) -> Result<Self, MemvizError> {
        Self::open_in(pid, default_dir())
    }

    pub fn open_in(pid: u32, probe_dir: PathBuf) -> Result<Self, MemvizError> {
        let owner = std::fs::metadata(format!("/proc/{pid}")).map_err(|_| MemvizError::NoProcess(pid))?.uid();
        if owner != current_uid() {
            return Err(MemvizError::Foreign { pid, owner });
        }
        let ticks = procstat::start_ticks(Path::new("/proc"), pid).ok_or(MemvizError::NoProcess(pid))?;
        let probe_dir = ProbeDir::new(probe_dir);
        let shown = probe_dir.path.display().to_string();
        match probe_dir.check() {
            Ok(true) => {}
            Ok(false) => return Err(no_probe(pid, shown)),
            Err(e) => return Err(MemvizError::Dir(e.to_string())),
        }
        let dir = DirFd::open_nofollow(&probe_dir.path).map_err(|e| MemvizError::Dir(format!("{shown}: {e}")))?;
        let stem = format!("{pid}-{ticks}");
        let interval = probe_interval(&dir, &stem, pid, ticks).ok_or_else(|| no_probe(pid, shown.clone()))?;
        Ok(Self { pid, dir, stem, interval, shown, path: probe_dir.path })
    }

    /// Leaves `request` where the probe looks: written aside, then renamed
    /// into place, so the probe never reads half of it.
    pub fn ask(&self, request: &serde_json::Value) -> Result<(), MemvizError> {
        let stem = &self.stem;
        let temp = format!(".{stem}.request.{}.tmp", random_hex());
        let write = || -> std::io::Result<()> {
            let mut file = self.dir.create_new(OsStr::new(&temp), 0o600)?;
            file.write_all(request.to_string().as_bytes())?;
            drop(file);
            self.dir.rename(OsStr::new(&temp), OsStr::new(&format!("{stem}.request")))
        };
        write().map_err(|e| MemvizError::Dir(format!("cannot leave the request in {}: {e}", self.shown)))
    }

    /// The probe's answer `<stem>.<suffix>`, if it is a regular file of
    /// this user's within `limit` bytes that parses.
    pub fn read<T: DeserializeOwned>(&self, suffix: &str, limit: u64) -> Option<T> {
        let file = self.dir.open_file(OsStr::new(&format!("{}.{suffix}", self.stem))).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.uid() != current_uid() {
            return None;
        }
        let mut text = String::new();
        file.take(limit).read_to_string(&mut text).ok()?;
        serde_json::from_str(&text).ok()
    }
}

/// Where the snapshot is once the probe has written it (and copied, with
/// `output`).
pub fn run(pid: u32, output: Option<&Path>, history: Option<Duration>) -> Result<PathBuf, MemvizError> {
    if let Some(path) = output.filter(|p| std::fs::symlink_metadata(p).is_ok()) {
        return Err(MemvizError::Output {
            path: path.into(),
            why: "already exists; gpuscope does not overwrite it".into(),
        });
    }
    let channel = ProbeChannel::open(pid)?;
    let file = request(&channel, history)?;
    let Some(output) = output else { return Ok(channel.path.join(&file)) };
    copy_out(&channel.dir, &file, output)?;
    // Asked for by this run and copied: the probe directory's copies go.
    let _ = channel.dir.unlink(OsStr::new(&file));
    let _ = channel.dir.unlink(OsStr::new(&format!("{}.memviz.json", channel.stem)));
    Ok(output.to_path_buf())
}

/// PyTorch's snapshot as it is now, left in the probe directory: where.
pub fn ask_snapshot(channel: &ProbeChannel) -> Result<PathBuf, MemvizError> {
    request(channel, None).map(|file| channel.path.join(file))
}

/// The snapshot's file name in the probe directory, once written.
fn request(channel: &ProbeChannel, history: Option<Duration>) -> Result<String, MemvizError> {
    let id = random_hex();
    channel.ask(&serde_json::json!({
        "kind": "memviz", "id": id, "history_s": history.map(|h| h.as_secs_f64()),
    }))?;
    // The probe looks at its next wake-up: within its interval, or a
    // second; then the history, then the dump itself.
    let patience = channel.interval + history.unwrap_or_default() + Duration::from_secs(15);
    wait(channel, &id, patience)
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

fn wait(channel: &ProbeChannel, id: &str, patience: Duration) -> Result<String, MemvizError> {
    let (pid, stem) = (channel.pid, channel.stem.as_str());
    let started = Instant::now();
    let mut told = false;
    while started.elapsed() < patience {
        if let Some(answer) = channel.read::<Answer>("memviz.json", 4096).filter(|a| a.id.as_deref() == Some(id)) {
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
                    crate::output::stderr::say!("gpuscope: process {pid} is recording its allocation history...");
                    told = true;
                }
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(MemvizError::Timeout { pid, waited: patience })
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
