//! Reads the probe directory each tick. Every file is opened without
//! following links, checked to be a small regular file of this user's, and
//! parsed strictly; a bad one is skipped and counted once, never fatal.
//! Files of processes that have ended are removed, so nothing stale lingers
//! after a `kill -9`.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::dir::{ProbeDir, current_uid};
use super::file::{MAX_FILE_BYTES, ProbeFile};
use super::{ProbeReport, ProbeSample, ProbeSource};
use crate::model::ProbeStatus;
use crate::sources::procstat::StatFile;

/// A file's name, size and modification time (ns).
type Key = (String, u64, i64);

/// Bounds the work of one tick however many files appear.
const MAX_FILES: usize = 4096;
/// A writer killed between writing and renaming leaves its temp file.
const TEMP_FILE_MAX_AGE: Duration = Duration::from_secs(60);

pub struct FileProbes {
    dir: ProbeDir,
    proc_root: PathBuf,
    /// Files already counted as bad, by name, size and mtime: each bad
    /// version of a file is counted once, not once per tick.
    bad: HashSet<Key>,
    skipped: u64,
    last_skipped: Option<String>,
    /// `/proc/PID/stat` held open per probed process: the identity check
    /// runs for every file on every tick.
    stats: HashMap<u32, StatFile>,
    buf: Vec<u8>,
}

impl FileProbes {
    pub fn new(dir: PathBuf) -> Self {
        Self::with_proc(dir, PathBuf::from("/proc"))
    }

    pub fn with_proc(dir: PathBuf, proc_root: PathBuf) -> Self {
        Self {
            dir: ProbeDir::new(dir),
            proc_root,
            bad: HashSet::new(),
            skipped: 0,
            last_skipped: None,
            stats: HashMap::new(),
            buf: Vec::new(),
        }
    }

    fn status(&self, ok: bool, error: Option<String>, files: u32) -> ProbeStatus {
        ProbeStatus {
            ok,
            error,
            directory: Some(self.dir.path.display().to_string()),
            files,
            skipped: self.skipped,
            last_skipped: self.last_skipped.clone(),
        }
    }

    fn skip(&mut self, name: &str, key: Key, why: String) {
        if self.bad.insert(key) {
            self.skipped += 1;
            self.last_skipped = Some(format!("{name}: {why}"));
        }
    }

    /// Through the file held open for the process, else a fresh open (the
    /// first time, or once the process it was opened for has exited).
    fn start_ticks(&mut self, pid: u32) -> Option<u64> {
        if let Some(stat) = self.stats.get(&pid).and_then(|f| f.read(&mut self.buf)) {
            return Some(stat.start_ticks);
        }
        self.stats.remove(&pid);
        let file = StatFile::open(&self.proc_root, pid)?;
        let ticks = file.read(&mut self.buf)?.start_ticks;
        self.stats.insert(pid, file);
        Some(ticks)
    }

    fn read_one(&mut self, name: &str, pid: u32, ticks: u64) -> Option<ProbeReport> {
        let path = self.dir.path.join(name);
        let (text, key, modified) = match open_small_private(&path) {
            Ok(read) => read,
            Err((key, why)) => {
                self.skip(name, key, why);
                return None;
            }
        };
        if self.bad.contains(&key) {
            return None;
        }
        let file = match ProbeFile::parse(&text, pid, ticks) {
            Ok(f) => f,
            Err(why) => {
                self.skip(name, key, why);
                return None;
            }
        };
        let alive = match self.start_ticks(pid) {
            Some(now) if now == ticks => true,
            // The PID belongs to another process now: these figures are
            // not its, not even as "gone".
            Some(_) => {
                let _ = std::fs::remove_file(&path);
                return None;
            }
            // Ended: reported as gone this once (NVML may still list the
            // PID for a moment), then the file goes.
            None => {
                let _ = std::fs::remove_file(&path);
                false
            }
        };
        let age = SystemTime::now().duration_since(modified).unwrap_or(Duration::ZERO);
        Some(ProbeReport { file, alive, age })
    }
}

impl ProbeSource for FileProbes {
    fn sample(&mut self) -> ProbeSample {
        match self.dir.check() {
            Ok(true) => {}
            Ok(false) => return ProbeSample { reports: Vec::new(), status: self.status(true, None, 0) },
            Err(e) => return ProbeSample { reports: Vec::new(), status: self.status(false, Some(e.to_string()), 0) },
        }
        let entries = match std::fs::read_dir(&self.dir.path) {
            Ok(e) => e,
            Err(e) => {
                let error = format!("cannot list {}: {e}", self.dir.path.display());
                return ProbeSample { reports: Vec::new(), status: self.status(false, Some(error), 0) };
            }
        };
        let mut reports = Vec::new();
        let mut present = HashSet::new();
        for entry in entries.flatten().take(MAX_FILES) {
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
            if let Some((pid, ticks)) = parse_name(&name) {
                reports.extend(self.read_one(&name, pid, ticks));
                present.insert(name);
            } else if name.starts_with('.') && name.ends_with(".tmp") {
                remove_if_old(&entry.path());
            }
        }
        reports.sort_by_key(|r| r.file.pid);
        // Forget bad files that are gone, so the set stays small.
        self.bad.retain(|(name, _, _)| present.contains(name));
        let probed: HashSet<u32> = present.iter().filter_map(|n| parse_name(n)).map(|(pid, _)| pid).collect();
        self.stats.retain(|pid, _| probed.contains(pid));
        let files = u32::try_from(present.len()).unwrap_or(u32::MAX);
        ProbeSample { reports, status: self.status(true, None, files) }
    }
}

/// `<pid>-<start_ticks>.json`
fn parse_name(name: &str) -> Option<(u32, u64)> {
    let stem = name.strip_suffix(".json")?;
    let (pid, ticks) = stem.split_once('-')?;
    Some((pid.parse().ok()?, ticks.parse().ok()?))
}

/// Opens without following a link and without blocking on a FIFO, then
/// checks what was opened (not what the name pointed to a moment ago).
fn open_small_private(path: &Path) -> Result<(String, Key, SystemTime), (Key, String)> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let unknown = (name.clone(), 0, 0);
    let file: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| (unknown.clone(), format!("cannot open: {e}")))?;
    let meta = file.metadata().map_err(|e| (unknown, format!("cannot stat: {e}")))?;
    let key = (name, meta.len(), meta.mtime_nsec() + meta.mtime() * 1_000_000_000);
    if !meta.is_file() {
        return Err((key, "not a regular file".into()));
    }
    if meta.uid() != current_uid() {
        return Err((key, format!("owned by uid {}, not by this user", meta.uid())));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err((key, format!("{} bytes, more than a probe writes", meta.len())));
    }
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1).read_to_string(&mut text).map_err(|e| (key.clone(), format!("unreadable: {e}")))?;
    let modified = meta.modified().unwrap_or_else(|_| SystemTime::now());
    Ok((text, key, modified))
}

fn remove_if_old(path: &Path) {
    let old = std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > TEMP_FILE_MAX_AGE);
    if old {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::sources::probe::file::sample_json;

    fn setup() -> (tempfile::TempDir, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("gpuscope").join("probes");
        std::fs::create_dir_all(&dir).unwrap();
        for d in [dir.parent().unwrap(), dir.as_path()] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        (root, dir)
    }

    fn me() -> (u32, u64) {
        let pid = std::process::id();
        (pid, crate::sources::procstat::start_ticks(Path::new("/proc"), pid).unwrap())
    }

    #[test]
    fn live_process_is_reported_and_bad_files_are_counted_once() {
        let (_root, dir) = setup();
        let (pid, ticks) = me();
        std::fs::write(dir.join(format!("{pid}-{ticks}.json")), sample_json(pid, ticks)).unwrap();
        std::fs::write(dir.join("1-1.json"), "{ garbage").unwrap();
        std::fs::write(dir.join("2-2.json"), vec![b' '; 100_000]).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("3-3.json")).unwrap();
        std::fs::write(dir.join("README"), "not ours to judge").unwrap();
        let mut probes = FileProbes::new(dir.clone());
        for _ in 0..3 {
            let s = probes.sample();
            assert_eq!(s.reports.len(), 1);
            assert!(s.reports[0].alive);
            assert_eq!(s.reports[0].file.pid, pid);
            assert!(s.status.ok);
            assert_eq!(s.status.skipped, 3, "{:?}", s.status.last_skipped);
        }
    }

    #[test]
    fn a_recycled_pid_gets_nothing_and_the_file_goes() {
        let (_root, dir) = setup();
        let (pid, ticks) = me();
        // Same PID, other start time: an earlier process that had this PID.
        let stale = dir.join(format!("{pid}-{}.json", ticks + 1));
        std::fs::write(&stale, sample_json(pid, ticks + 1)).unwrap();
        let s = FileProbes::new(dir).sample();
        assert!(s.reports.is_empty());
        assert!(!stale.exists());
    }

    #[test]
    fn an_ended_process_is_gone_once_then_removed() {
        let (_root, dir) = setup();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let file = dir.join(format!("{pid}-5.json"));
        std::fs::write(&file, sample_json(pid, 5)).unwrap();
        let mut probes = FileProbes::new(dir);
        let s = probes.sample();
        assert_eq!(s.reports.len(), 1);
        assert!(!s.reports[0].alive);
        assert!(!file.exists());
        assert!(probes.sample().reports.is_empty());
    }

    #[test]
    fn an_open_directory_is_refused() {
        let (_root, dir) = setup();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let s = FileProbes::new(dir).sample();
        assert!(!s.status.ok);
        assert!(s.status.error.unwrap().contains("0700"));
    }

    #[test]
    fn names_are_parsed_strictly() {
        assert_eq!(parse_name("12-34.json"), Some((12, 34)));
        assert_eq!(parse_name("12-34.json.tmp"), None);
        assert_eq!(parse_name("x-34.json"), None);
        assert_eq!(parse_name("../12-34.json"), None);
    }
}
