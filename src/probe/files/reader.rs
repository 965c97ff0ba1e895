//! Reads the probe directory each tick. Every file is opened without
//! following links, checked to be a small regular file of this user's, and
//! parsed strictly; a bad one is skipped and counted once, never fatal.
//!
//! A file is removed only when the process it names is provably gone: this
//! reader saw that very process (PID and start time) running in its own
//! PID namespace, and it has ended since; its leftover temporary files go
//! with it. Anything else stays where it is: a PID in a file from another
//! namespace (a container sharing the directory) means another process
//! here, and a file whose process ended while no gpuscope was watching
//! cannot be told apart from one. Such a file is skipped and counted once.

use std::collections::{HashMap, HashSet};

use super::container::ProcessViews;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::dir::ProbeDir;
use super::file::{MAX_FILE_BYTES, ProbeFile, read_regular};
use super::{ProbeReport, ProbeSample, ProbeSource};
use crate::hashing::{IntMap, IntSet};
use crate::model::ProbeStatus;
use crate::sources::liveness::{self, Exited, Held};
use crate::sources::procstat;
use crate::util::current_uid;
use crate::util::dirfd::DirFd;

/// A file's name, size and modification time (ns).
type Key = (String, u64, i64);

/// Bounds the work of one tick however many files appear.
const MAX_FILES: usize = 4096;

pub struct FileProbes {
    dir: ProbeDir,
    proc_root: PathBuf,
    /// Files already counted as bad, by name, size and mtime: each bad
    /// version of a file is counted once, not once per tick.
    bad: HashSet<Key>,
    skipped: u64,
    last_skipped: Option<String>,
    /// Each probed process held open: the identity check runs for every
    /// file on every tick.
    held: IntMap<u32, Held>,
    /// Which of them had exited at the start of this tick, all asked at
    /// once (`Exited::poll`).
    exited: Exited,
    /// `proc_root` is the kernel's own `/proc` of this PID namespace, so
    /// that its PIDs can be held by pidfds.
    own_view: bool,
    /// `pid:[inode]` of gpuscope's own PID namespace, when `proc_root`
    /// numbers processes as this process sees them; `None` (cannot tell)
    /// means no file is ever removed.
    own_ns: Option<OsString>,
    /// Processes (PID, start time) seen running in that namespace: only
    /// their files may be removed, once they have ended.
    seen: IntSet<(u32, u64)>,
    /// GPU processes whose probe writes elsewhere (a container, another
    /// user's directory), read through their own roots.
    views: ProcessViews,
    /// Reasons already counted for those, each once.
    view_bad: HashSet<String>,
    /// The last version of each file read (its key and inode), parsed: a
    /// probe rewrites its file once a second while gpuscope may tick ten
    /// times as often, and hundreds of probed processes cost a parse each
    /// only when they change. The probe renames a new file over the old,
    /// so a new version is a new inode; the same inode, size and
    /// modification time is the version already parsed.
    parsed: HashMap<String, Parsed>,
    /// This process's user, whose files alone are read.
    uid: u32,
    /// The bytes of the last file read, kept for the next.
    buf: Vec<u8>,
    /// Files opened (`open_small_private`), for the tests to count.
    #[cfg(test)]
    opens: usize,
}

/// A version read before, as `parsed` keeps it.
struct Parsed {
    key: Key,
    inode: u64,
    file: Arc<ProbeFile>,
    /// Opened once its successor was due and found still current: a probe
    /// that stopped writing (its process stopped or hung) or writes late.
    /// Such a version is checked with the one `statx` from then on, not
    /// opened every tick for a successor that may never come.
    late: bool,
}

impl FileProbes {
    pub fn new(dir: PathBuf) -> Self {
        Self::with_proc(dir, PathBuf::from("/proc"))
    }

    /// Looks through many GPU processes' own views at once on as many
    /// threads as there are CPUs (`ProcessViews::spreading`), for a run of
    /// one snapshot.
    pub fn spreading_looks(mut self) -> Self {
        self.views = self.views.spreading();
        self
    }

    pub fn with_proc(dir: PathBuf, proc_root: PathBuf) -> Self {
        let views = ProcessViews::new(proc_root.clone(), &dir);
        Self {
            dir: ProbeDir::new(dir),
            bad: HashSet::new(),
            skipped: 0,
            last_skipped: None,
            held: IntMap::default(),
            exited: Exited::default(),
            own_view: liveness::pidfds_serve(&proc_root),
            own_ns: own_namespace(&proc_root),
            seen: IntSet::default(),
            views,
            view_bad: HashSet::new(),
            parsed: HashMap::new(),
            #[cfg(test)]
            opens: 0,
            uid: current_uid(),
            buf: Vec::new(),
            proc_root,
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

    /// Through the process held open, else a fresh open (the first time,
    /// or once the process it was opened for has exited). `now`: asked
    /// anew rather than as this tick's poll found it. `Err`: it could not
    /// be told (out of descriptors, say), which is never "gone".
    fn start_ticks(&mut self, pid: u32, now: bool) -> Result<Option<u64>, String> {
        let polled = (!now).then_some(&self.exited);
        if let Some(held) = self.held.get(&pid).filter(|h| h.alive(&self.proc_root, polled)) {
            return Ok(Some(held.start_ticks));
        }
        self.held.remove(&pid);
        let held = Held::open(&self.proc_root, pid, self.own_view)
            .map_err(|e| format!("cannot tell whether process {pid} runs: {e}"))?;
        let Some(held) = held else { return Ok(None) };
        let ticks = held.start_ticks;
        self.held.insert(pid, held);
        Ok(Some(ticks))
    }

    /// `now`: the sample's time, read once for all its files.
    fn read_one(&mut self, dir: &DirFd, name: &str, pid: u32, ticks: u64, now: SystemTime) -> Option<ProbeReport> {
        let (file, modified) = match self.unchanged(dir, name, now) {
            Some(known) => known,
            None => self.read_version(dir, name, pid, ticks)?,
        };
        let alive = match self.identify(pid, ticks, file.pid_ns.as_deref()) {
            Identity::Running => true,
            // Counted once per file, not per version: a probe in another
            // namespace rewrites its file every second. Judged again each
            // tick, since nothing about the file itself is wrong.
            Identity::Unknown(why) => {
                self.skip(name, (name.to_owned(), 0, 0), format!("{why}; left in place"));
                return None;
            }
            // Provably ended: the file goes. When the PID is free it is
            // reported as gone this once (NVML may still list it for a
            // moment); when another process has it, these figures are not
            // that one's, not even as "gone".
            Identity::Ended { pid_reused } => {
                let _ = dir.unlink(OsStr::new(name));
                if pid_reused {
                    return None;
                }
                false
            }
        };
        let age = now.duration_since(modified).unwrap_or(Duration::ZERO);
        Some(ProbeReport { file, alive, age })
    }

    /// The version parsed before, while the name is still that very file:
    /// the same inode, size and modification time, still a regular file of
    /// this user's (what `open_small_private` checks of a file it opens).
    /// One `statx` where opening, `fstat` and closing take three: a probe
    /// rewrites its file once a second, while the dashboard may tick ten
    /// times as often, over hundreds of probed ranks.
    /// A version whose successor is due by the probe's own interval is not
    /// checked first but opened at once: the check would be one call more.
    /// Once such an opening found no successor, the version is late, and
    /// gets the one `statx` each tick from then on, as a version not yet
    /// due does.
    fn unchanged(&self, dir: &DirFd, name: &str, now: SystemTime) -> Option<(Arc<ProbeFile>, SystemTime)> {
        let Parsed { key: (_, len, mtime_ns), inode, file, late } = self.parsed.get(name)?;
        if !late && due(*mtime_ns, file.interval_s, now) {
            return None;
        }
        let now = dir.stat_nofollow(OsStr::new(name)).ok()?;
        let same = now.is_file && now.uid == self.uid && (now.ino, now.len, now.mtime_ns) == (*inode, *len, *mtime_ns);
        same.then(|| (Arc::clone(file), since_epoch(now.mtime_ns)))
    }

    /// A version not parsed before: opened, checked, read and parsed; a bad
    /// one is counted once and skipped.
    fn read_version(&mut self, dir: &DirFd, name: &str, pid: u32, ticks: u64) -> Option<(Arc<ProbeFile>, SystemTime)> {
        #[cfg(test)]
        {
            self.opens += 1;
        }
        let opened = match open_small_private(dir, name, self.uid) {
            Ok(opened) => opened,
            Err((key, why)) => {
                self.skip(name, key, why);
                return None;
            }
        };
        if self.bad.contains(&opened.key) {
            return None;
        }
        match self.parse_version(name, opened, pid, ticks) {
            Ok(parsed) => Some(parsed),
            Err((key, why)) => {
                self.skip(name, key, why);
                None
            }
        }
    }

    /// The file's contents parsed, from the cache when this version was
    /// read before: the checks on what was opened (`open_small_private`)
    /// run every time, the read and the parse only for a new version.
    fn parse_version(
        &mut self,
        name: &str,
        opened: Opened,
        pid: u32,
        ticks: u64,
    ) -> Result<(Arc<ProbeFile>, SystemTime), (Key, String)> {
        if let Some(known) = self.parsed.get_mut(name)
            && (&known.key, known.inode) == (&opened.key, opened.inode)
        {
            // Opened only when due (`unchanged`), yet the same version.
            known.late = true;
            return Ok((Arc::clone(&known.file), opened.modified));
        }
        read_regular(&opened.file, opened.key.1, &mut self.buf)
            .map_err(|e| (opened.key.clone(), format!("unreadable: {e}")))?;
        let text =
            std::str::from_utf8(&self.buf).map_err(|_| (opened.key.clone(), "unreadable: not UTF-8".to_owned()))?;
        let file = ProbeFile::parse(text, pid, ticks).map_err(|why| (opened.key.clone(), why));
        // Room for a file of a few KiB kept; one near the limit is not a
        // probe's and its room is not kept for the next tick.
        self.buf.clear();
        self.buf.shrink_to(16 * 1024);
        let file = Arc::new(file?);
        let parsed = Parsed { key: opened.key, inode: opened.inode, file: Arc::clone(&file), late: false };
        // In place where the name is known: no copy of it per new version.
        match self.parsed.get_mut(name) {
            Some(known) => *known = parsed,
            None => drop(self.parsed.insert(name.to_owned(), parsed)),
        }
        Ok((file, opened.modified))
    }

    fn open_dir(&self) -> Result<DirFd, String> {
        let shown = self.dir.path.display();
        let dir = DirFd::open_nofollow(&self.dir.path).map_err(|e| format!("cannot open {shown}: {e}"))?;
        let m = dir.metadata().map_err(|e| format!("cannot stat {shown}: {e}"))?;
        if m.uid() != self.uid || m.mode() & 0o077 != 0 {
            return Err(format!("{shown} changed: no longer a private directory of this user's"));
        }
        Ok(dir)
    }

    /// Whether the process a file names runs, has provably ended, or
    /// cannot be told.
    /// `claimed_ns` is the namespace the probe wrote down for itself: equal
    /// to gpuscope's own, it makes a process that ended unseen (a kill -9
    /// while no gpuscope watched) provably gone, since PIDs and start times
    /// in one namespace name one process.
    fn identify(&mut self, pid: u32, ticks: u64, claimed_ns: Option<&str>) -> Identity {
        let now = match self.start_ticks(pid, false) {
            Ok(now) => now,
            Err(why) => return Identity::Unknown(why),
        };
        let ours = self.own_ns.as_deref().zip(claimed_ns).is_some_and(|(own, claimed)| own == claimed);
        if self.seen.contains(&(pid, ticks)) || (ours && now != Some(ticks)) {
            if now == Some(ticks) {
                return Identity::Running;
            }
            self.seen.remove(&(pid, ticks));
            return Identity::Ended { pid_reused: now.is_some() };
        }
        if now != Some(ticks) {
            return Identity::Unknown(format!(
                "process {pid} (start {ticks}) was never seen running in gpuscope's PID namespace"
            ));
        }
        let same = match (&self.own_ns, namespace(&self.proc_root, pid)) {
            (Some(own), Some(its)) if *own != its => {
                return Identity::Unknown(format!("process {pid} is in another PID namespace"));
            }
            (Some(_), Some(_)) => true,
            // Cannot tell: reported while it runs, never removed.
            _ => false,
        };
        // Read again after the namespace: still the same process, so the
        // namespace read was its own, not a successor's.
        if same && self.start_ticks(pid, true) == Ok(Some(ticks)) {
            self.seen.insert((pid, ticks));
        }
        Identity::Running
    }
}

enum Identity {
    Running,
    Ended { pid_reused: bool },
    Unknown(String),
}

/// `pid:[inode]` of a process's PID namespace.
fn namespace(proc_root: &Path, pid: u32) -> Option<OsString> {
    std::fs::read_link(proc_root.join(pid.to_string()).join("ns/pid")).ok().map(PathBuf::into_os_string)
}

/// This process's PID namespace, provided `proc_root` is a view of it (its
/// `self` is this process's PID as this process knows it): only then do the
/// PIDs under `proc_root` mean what the probes' file names mean.
fn own_namespace(proc_root: &Path) -> Option<OsString> {
    procstat::is_own_view(proc_root).then(|| namespace(proc_root, std::process::id())).flatten()
}

impl ProbeSource for FileProbes {
    fn sample_with(&mut self, gpu_pids: &[u32]) -> ProbeSample {
        let mut sample = self.sample();
        let reported: IntSet<u32> = sample.reports.iter().map(|r| r.file.pid).collect();
        let me = std::process::id();
        let unreported = gpu_pids.iter().copied().filter(|&p| p != me && !reported.contains(&p));
        for outcome in self.views.read_all(unreported) {
            match outcome {
                Ok(report) => sample.reports.push(report),
                Err(Some(why)) => {
                    if self.view_bad.len() > 1024 {
                        self.view_bad.clear();
                    }
                    if self.view_bad.insert(why.clone()) {
                        self.skipped += 1;
                        self.last_skipped = Some(why);
                    }
                }
                Err(None) => {}
            }
        }
        self.views.retain(gpu_pids);
        sample.reports.sort_by_key(|r| r.file.pid);
        sample.status.skipped = self.skipped;
        sample.status.last_skipped.clone_from(&self.last_skipped);
        sample
    }

    fn sample(&mut self) -> ProbeSample {
        match self.dir.check() {
            Ok(true) => {}
            Ok(false) => return ProbeSample { reports: Vec::new(), status: self.status(true, None, 0) },
            Err(e) => return ProbeSample { reports: Vec::new(), status: self.status(false, Some(e.to_string()), 0) },
        }
        // Judged again through the descriptor every file is then listed,
        // opened and removed by: a directory swapped in after the check
        // above is caught, and nothing below it is reached through a link.
        let listed = self.open_dir().and_then(|dir| {
            let entries = dir.read_dir().map_err(|e| format!("cannot list {}: {e}", self.dir.path.display()))?;
            Ok((dir, entries))
        });
        let (dir, entries) = match listed {
            Ok(listed) => listed,
            Err(error) => return ProbeSample { reports: Vec::new(), status: self.status(false, Some(error), 0) },
        };
        // Sized by the last tick's count: the same files, nearly always.
        let expected = self.parsed.len();
        let mut reports = Vec::with_capacity(expected);
        let mut present = HashSet::with_capacity(expected);
        // The same files by (PID, start ticks), for the maps keyed so.
        let mut present_ids = IntSet::with_capacity_and_hasher(expected, Default::default());
        let mut temps = Vec::new();
        let mut ended = Vec::new();
        let now = SystemTime::now();
        self.exited = Exited::poll(self.held.values());
        for entry in entries.flatten().take(MAX_FILES) {
            let Ok(name) = entry.file_name().into_string() else { continue };
            if let Some((pid, ticks)) = parse_name(&name) {
                let was_seen = self.seen.contains(&(pid, ticks));
                reports.extend(self.read_one(&dir, &name, pid, ticks, now));
                present.insert(name);
                present_ids.insert((pid, ticks));
                if was_seen && !self.seen.contains(&(pid, ticks)) {
                    ended.push((pid, ticks));
                }
            } else if let Some(id) = parse_temp_name(&name) {
                temps.push((name, id));
            }
        }
        // A writer killed between writing and renaming leaves its temporary
        // file: it goes with the process, once that has provably ended.
        for (name, id) in temps {
            if ended.contains(&id) {
                let _ = dir.unlink(OsStr::new(&name));
            }
        }
        reports.sort_by_key(|r| r.file.pid);
        // Forget bad files that are gone, so the set stays small.
        self.bad.retain(|(name, _, _)| present.contains(name));
        self.parsed.retain(|name, _| present.contains(name));
        self.seen.retain(|id| present_ids.contains(id));
        let probed: IntSet<u32> = present_ids.iter().map(|&(pid, _)| pid).collect();
        self.held.retain(|pid, _| probed.contains(pid));
        let files = u32::try_from(present.len()).unwrap_or(u32::MAX);
        ProbeSample { reports, status: self.status(true, None, files) }
    }
}

/// Whether a probe that wrote at `mtime_ns` and writes every `interval_s`
/// has written again by `now`.
fn due(mtime_ns: i64, interval_s: f64, now: SystemTime) -> bool {
    now.duration_since(since_epoch(mtime_ns)).is_ok_and(|age| age.as_secs_f64() >= interval_s)
}

/// A modification time as `SystemTime`, before the epoch too.
fn since_epoch(ns: i64) -> SystemTime {
    let at = Duration::from_nanos(ns.unsigned_abs());
    if ns >= 0 { SystemTime::UNIX_EPOCH + at } else { SystemTime::UNIX_EPOCH - at }
}

/// `<pid>-<start_ticks>.json`
fn parse_name(name: &str) -> Option<(u32, u64)> {
    parse_stem(name.strip_suffix(".json")?)
}

fn parse_stem(stem: &str) -> Option<(u32, u64)> {
    let (pid, ticks) = stem.split_once('-')?;
    Some((pid.parse().ok()?, ticks.parse().ok()?))
}

/// `.<pid>-<start_ticks>.<hex>.tmp`, as the probe names a file it has not
/// renamed yet.
fn parse_temp_name(name: &str) -> Option<(u32, u64)> {
    let inner = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let (stem, hex) = inner.split_once('.')?;
    if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    parse_stem(stem)
}

/// A probe file opened and checked, not yet read.
struct Opened {
    file: File,
    key: Key,
    inode: u64,
    modified: SystemTime,
}

/// Opens without following a link and without blocking on a FIFO, then
/// checks what was opened (not what the name pointed to a moment ago).
fn open_small_private(dir: &DirFd, name: &str, uid: u32) -> Result<Opened, (Key, String)> {
    let unknown = || (name.to_owned(), 0, 0);
    let file: File = dir.open_file(OsStr::new(name)).map_err(|e| (unknown(), format!("cannot open: {e}")))?;
    let meta = file.metadata().map_err(|e| (unknown(), format!("cannot stat: {e}")))?;
    let key = (name.to_owned(), meta.len(), meta.mtime_nsec() + meta.mtime() * 1_000_000_000);
    if !meta.is_file() {
        return Err((key, "not a regular file".into()));
    }
    if meta.uid() != uid {
        return Err((key, format!("owned by uid {}, not by this user", meta.uid())));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err((key, format!("{} bytes, more than a probe writes", meta.len())));
    }
    let modified = meta.modified().unwrap_or_else(|_| SystemTime::now());
    Ok(Opened { file, key, inode: meta.ino(), modified })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::probe::files::file::sample_json;

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

    /// This process's probe file (`probe_file`, `seq` 3) and its text.
    fn own_probe_file(dir: &Path) -> (PathBuf, String) {
        let (pid, ticks) = me();
        (probe_file(dir, pid, ticks), sample_json(pid, ticks))
    }

    /// `seq` 4, renamed over the file as the probe does.
    fn write_next_version(path: &Path, text: &str) {
        let newer = text.replace("\"seq\":3", "\"seq\":4");
        assert_ne!(newer, text);
        let tmp = path.with_file_name(".next.ab.tmp");
        std::fs::write(&tmp, &newer).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    }

    /// A version already parsed is not read again: bytes changed in place
    /// with the size and modification time kept (only the owner could do
    /// that) go unnoticed, while a new version renamed over the file, as
    /// the probe writes, is read.
    #[test]
    fn an_unchanged_file_is_parsed_once() {
        let (_root, dir) = setup();
        let (path, text) = own_probe_file(&dir);
        let mut probes = FileProbes::new(dir.clone());
        let first = probes.sample();
        assert_eq!(first.reports.len(), 1);

        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, " ".repeat(text.len())).unwrap();
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(mtime).unwrap();
        let again = probes.sample();
        assert_eq!(again.reports.len(), 1, "{:?}", again.status.last_skipped);
        assert_eq!(again.reports[0].file, first.reports[0].file);
        assert_eq!(again.status.skipped, 0);

        write_next_version(&path, &text);
        let changed = probes.sample();
        assert_eq!(changed.reports[0].file.seq, 4);
    }

    /// A probe that stopped writing (its process stopped, or hung): once
    /// its file, opened when the next version was due, proved unchanged,
    /// it is checked each tick, not opened; a new version is still read.
    #[test]
    fn a_late_version_is_checked_not_opened_every_tick() {
        let (_root, dir) = setup();
        let (path, text) = own_probe_file(&dir);
        // Its interval is a second: written a minute ago, it is late.
        let long_ago = SystemTime::now() - Duration::from_secs(60);
        File::options().write(true).open(&path).unwrap().set_modified(long_ago).unwrap();
        let mut probes = FileProbes::new(dir.clone());
        let seqs = |probes: &mut FileProbes| probes.sample().reports.iter().map(|r| r.file.seq).collect::<Vec<_>>();
        assert_eq!((seqs(&mut probes), probes.opens), (vec![3], 1));
        assert_eq!((seqs(&mut probes), probes.opens), (vec![3], 2), "due: opened at once");
        for _ in 0..3 {
            assert_eq!((seqs(&mut probes), probes.opens), (vec![3], 2), "late: checked, not opened");
        }

        write_next_version(&path, &text);
        assert_eq!((seqs(&mut probes), probes.opens), (vec![4], 3), "a new version is read");
        assert_eq!((seqs(&mut probes), probes.opens), (vec![4], 3), "and, not yet due, checked");
    }

    /// The cheap check of a version read before sees what the name is now:
    /// a link put in the file's place is refused as it would be on a first
    /// read, even one to a copy of the very file.
    #[test]
    fn a_link_in_place_of_a_file_read_before_is_refused() {
        let (root, dir) = setup();
        let (pid, ticks) = me();
        let path = dir.join(format!("{pid}-{ticks}.json"));
        std::fs::write(&path, sample_json(pid, ticks)).unwrap();
        let mut probes = FileProbes::new(dir.clone());
        assert_eq!(probes.sample().reports.len(), 1);
        let copy = root.path().join("copy.json");
        std::fs::rename(&path, &copy).unwrap();
        std::os::unix::fs::symlink(&copy, &path).unwrap();
        let linked = probes.sample();
        assert!(linked.reports.is_empty());
        assert_eq!(linked.status.skipped, 1, "{:?}", linked.status.last_skipped);
        std::fs::remove_file(&path).unwrap();
        assert!(probes.sample().reports.is_empty());
    }

    /// A stand-in `/proc` where this process is `self` in namespace
    /// `pid:[1]`, and processes come, go and change as the test says.
    struct FakeProc {
        root: tempfile::TempDir,
    }

    impl FakeProc {
        fn new() -> Self {
            let root = tempfile::tempdir().unwrap();
            let me = std::process::id();
            std::os::unix::fs::symlink(me.to_string(), root.path().join("self")).unwrap();
            let fake = Self { root };
            fake.process(me, 1, "pid:[1]");
            fake
        }

        fn process(&self, pid: u32, ticks: u64, ns: &str) {
            let dir = self.root.path().join(pid.to_string());
            std::fs::create_dir_all(dir.join("ns")).unwrap();
            let _ = std::fs::remove_file(dir.join("ns/pid"));
            std::os::unix::fs::symlink(ns, dir.join("ns/pid")).unwrap();
            self.restart(pid, ticks);
        }

        /// Another process behind the PID: a descriptor held for the one
        /// before reads nothing (emptied in place), new opens reach the new
        /// one's files.
        fn restart(&self, pid: u32, ticks: u64) {
            let dir = self.root.path().join(pid.to_string());
            self.end(pid);
            let _ = std::fs::remove_file(dir.join("comm"));
            std::fs::write(dir.join("comm"), "python3\n").unwrap();
            let line = format!("{pid} (python3) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {ticks} 0 0\n");
            std::fs::write(dir.join("stat"), line).unwrap();
        }

        /// An exited process's held files read nothing.
        fn end(&self, pid: u32) {
            for file in ["stat", "comm"] {
                let _ = std::fs::write(self.root.path().join(format!("{pid}/{file}")), "");
            }
        }

        fn probes(&self, dir: &Path) -> FileProbes {
            FileProbes::with_proc(dir.to_path_buf(), self.root.path().to_path_buf())
        }
    }

    fn probe_file(dir: &Path, pid: u32, ticks: u64) -> PathBuf {
        let path = dir.join(format!("{pid}-{ticks}.json"));
        std::fs::write(&path, sample_json(pid, ticks)).unwrap();
        path
    }

    #[test]
    fn a_process_seen_running_that_ends_is_gone_once_then_its_files_go() {
        let (_root, dir) = setup();
        let proc = FakeProc::new();
        proc.process(700, 50, "pid:[1]");
        let file = probe_file(&dir, 700, 50);
        let temp = dir.join(".700-50.0123abcd.tmp");
        let others_temp = dir.join(".701-50.0123abcd.tmp");
        std::fs::write(&temp, "half").unwrap();
        std::fs::write(&others_temp, "half").unwrap();
        let mut probes = proc.probes(&dir);
        let s = probes.sample();
        assert!(s.reports[0].alive);
        proc.end(700);
        let s = probes.sample();
        assert_eq!(s.reports.len(), 1);
        assert!(!s.reports[0].alive, "gone, this once");
        assert!(!file.exists() && !temp.exists());
        assert!(others_temp.exists(), "another process's temporary file stays");
        assert!(probes.sample().reports.is_empty());
        assert_eq!(probes.sample().status.skipped, 0);
    }

    #[test]
    fn a_pid_seen_running_then_reused_gets_nothing_and_the_file_goes() {
        let (_root, dir) = setup();
        let proc = FakeProc::new();
        proc.process(700, 50, "pid:[1]");
        let file = probe_file(&dir, 700, 50);
        let mut probes = proc.probes(&dir);
        assert!(probes.sample().reports[0].alive);
        proc.restart(700, 90);
        assert!(probes.sample().reports.is_empty());
        assert!(!file.exists());
    }

    #[test]
    fn files_of_processes_never_seen_here_are_skipped_and_kept() {
        let (_root, dir) = setup();
        let proc = FakeProc::new();
        // No such PID here: ended unseen, or a PID of another namespace.
        let missing = probe_file(&dir, 800, 5);
        // The PID is another process here (started at 90, not 5).
        proc.process(801, 90, "pid:[1]");
        let other = probe_file(&dir, 801, 5);
        // Same PID and start, but a process of another namespace.
        proc.process(802, 7, "pid:[2]");
        let foreign = probe_file(&dir, 802, 7);
        let temp = dir.join(".800-5.0123abcd.tmp");
        std::fs::write(&temp, "half").unwrap();
        let mut probes = proc.probes(&dir);
        for _ in 0..3 {
            let s = probes.sample();
            assert!(s.reports.is_empty(), "{:?}", s.reports);
            assert_eq!(s.status.skipped, 3, "counted once each: {:?}", s.status.last_skipped);
            assert!(s.status.last_skipped.unwrap().contains("left in place"));
        }
        // Rewritten by their (foreign) writers: still counted once.
        std::fs::write(&foreign, sample_json(802, 7).replace("\"seq\":3", "\"seq\":4")).unwrap();
        assert_eq!(probes.sample().status.skipped, 3);
        for f in [&missing, &other, &foreign, &temp] {
            assert!(f.exists(), "{} kept", f.display());
        }
    }

    fn probe_file_in(dir: &Path, pid: u32, ticks: u64, ns: &str) -> PathBuf {
        let mut v: serde_json::Value = serde_json::from_str(&sample_json(pid, ticks)).unwrap();
        v["pid_ns"] = ns.into();
        let path = dir.join(format!("{pid}-{ticks}.json"));
        std::fs::write(&path, v.to_string()).unwrap();
        path
    }

    #[test]
    fn a_probe_of_this_namespace_that_ended_unseen_is_provably_gone() {
        let (_root, dir) = setup();
        let proc = FakeProc::new();
        // Killed while no gpuscope watched: its PID is free now...
        let free = probe_file_in(&dir, 900, 5, "pid:[1]");
        // ...or taken by a later process (started at 90, not 5).
        proc.process(901, 90, "pid:[1]");
        let reused = probe_file_in(&dir, 901, 5, "pid:[1]");
        // A probe of another namespace proves nothing here.
        let foreign = probe_file_in(&dir, 902, 5, "pid:[2]");
        let mut probes = proc.probes(&dir);
        let s = probes.sample();
        assert_eq!(s.reports.iter().map(|r| (r.file.pid, r.alive)).collect::<Vec<_>>(), [(900, false)]);
        assert!(!free.exists() && !reused.exists());
        assert!(foreign.exists());
        assert_eq!(s.status.skipped, 1);
    }

    #[test]
    fn without_a_namespace_to_compare_nothing_is_removed() {
        let (_root, dir) = setup();
        let proc = FakeProc::new();
        // `self` is not this process: the PIDs there are not in our terms.
        std::fs::remove_file(proc.root.path().join("self")).unwrap();
        std::os::unix::fs::symlink("1", proc.root.path().join("self")).unwrap();
        proc.process(700, 50, "pid:[1]");
        let file = probe_file(&dir, 700, 50);
        let mut probes = proc.probes(&dir);
        assert!(probes.sample().reports[0].alive, "still reported while it runs");
        proc.end(700);
        assert!(probes.sample().reports.is_empty());
        assert!(file.exists());
    }

    #[test]
    fn a_real_process_of_ours_is_followed_to_its_end() {
        let (_root, dir) = setup();
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        let ticks = crate::sources::procstat::start_ticks(Path::new("/proc"), pid).unwrap();
        let file = probe_file(&dir, pid, ticks);
        let mut probes = FileProbes::new(dir);
        assert!(probes.own_view, "held by a pidfd");
        assert!(probes.sample().reports[0].alive);
        child.kill().unwrap();
        while crate::sources::procstat::read(Path::new("/proc"), pid).is_some_and(|s| !s.exited()) {
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(probes.sample().reports[0].alive, "a zombie not yet reaped is still there, as in /proc");
        assert!(file.exists());
        child.wait().unwrap();
        let s = probes.sample();
        assert!(!s.reports[0].alive);
        assert!(!file.exists());
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
    fn what_is_opened_is_judged_again() {
        // As if swapped in between the path check and the open.
        let (root, dir) = setup();
        let link = root.path().join("gpuscope").join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(FileProbes::new(link).open_dir().unwrap_err().contains("cannot open"));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(FileProbes::new(dir).open_dir().unwrap_err().contains("no longer a private directory"));
    }

    #[test]
    fn a_version_is_due_once_its_interval_has_passed() {
        let at = |s: u64| SystemTime::UNIX_EPOCH + Duration::from_millis(s);
        assert!(!due(1_000_000_000, 1.0, at(1_500)));
        assert!(due(1_000_000_000, 1.0, at(2_000)));
        assert!(due(1_000_000_000, 0.25, at(1_250)));
        assert!(!due(1_000_000_000, 1.0, at(500)), "a clock set back: not due");
        assert!(due(-1_000_000_000, 1.0, at(0)), "before the epoch");
    }

    #[test]
    fn names_are_parsed_strictly() {
        assert_eq!(parse_name("12-34.json"), Some((12, 34)));
        assert_eq!(parse_name("12-34.json.tmp"), None);
        assert_eq!(parse_name("x-34.json"), None);
        assert_eq!(parse_name("../12-34.json"), None);
        assert_eq!(parse_temp_name(".12-34.00ff.tmp"), Some((12, 34)));
        assert_eq!(parse_temp_name(".12-34..tmp"), None);
        assert_eq!(parse_temp_name(".12-34.xyz.tmp"), None);
        assert_eq!(parse_temp_name("12-34.00ff.tmp"), None);
    }
}
