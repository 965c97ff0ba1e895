//! Probe files of processes gpuscope's own directory does not hold: a
//! process in a container (another mount and PID namespace: its probe
//! wrote into the container's own `/tmp` or runtime directory, and named
//! the file by its PID in there), another user's process when gpuscope
//! runs as root, or one started with its own `GPUSCOPE_PROBE_DIR`.
//!
//! Each is read through that process's own view of the filesystem,
//! `/proc/PID/root`, at the place the probe inside it would have chosen
//! (from its environment), every component opened without following a
//! link, so nothing leads out of that root. The file must be named for the
//! process's PID in its own namespace (the last `NSpid` entry) and its
//! start time, sit in directories of the process's own user that nobody
//! else can enter, and belong to that user: a file planted elsewhere, or
//! claiming another PID, is never attached. Nothing here is ever removed:
//! these files are not gpuscope's.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::ProbeReport;
use super::file::{MAX_FILE_BYTES, ProbeFile, read_regular};
use crate::hashing::{IntMap, IntSet};
use crate::sources::procstat;
use crate::util::dirfd::DirFd;
use crate::util::spread::on_threads;

/// `/proc/PID/environ` is a few KiB; a bound keeps a hostile one cheap.
const MAX_ENVIRON: usize = 256 * 1024;

/// What a process looks like from here, read once per process.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Identity {
    /// Its PID in its own namespace, as its probe names the file.
    inner_pid: u32,
    /// Its real uid as this namespace sees it: file owners are checked
    /// against it.
    uid: u32,
    /// Where its probe writes, inside its root; `None` when the probe
    /// could not have written anywhere gpuscope may read.
    dir: Option<PathBuf>,
}

/// Reads the probe files of the processes it is given, through their own
/// roots.
pub struct ProcessViews {
    proc_root: PathBuf,
    /// gpuscope's own view and directory: a process that sees the same
    /// files and writes where gpuscope reads already has its file read
    /// from gpuscope's own listing, so its view is never walked.
    own: Option<OwnView>,
    /// Per PID, with the start ticks of the process it was read for: a
    /// recycled PID is a new process. `None`: nothing to read through its
    /// view, for the process's life (it writes where gpuscope reads, its
    /// probe could write nowhere readable, or it cannot be read from here:
    /// another user's process, to a gpuscope that is not root).
    known: IntMap<u32, (u64, Option<Identity>)>,
    /// When to look again at a process where nothing was found: most GPU
    /// processes run no probe, and the walk costs a handful of system calls
    /// each, so they are looked at every few seconds, not every tick.
    retry_at: IntMap<u32, Instant>,
    /// Whether many looks at once may be spread over the CPUs
    /// (`spreading`).
    spread: bool,
}

std::thread_local! {
    /// The bytes of the last probe file read on this thread, kept for the
    /// next: the sampling thread's stays, a helper's goes with it.
    static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// What a look learned of a process it had not identified before: the
/// start ticks of the process read, and its identity (`known`'s entry).
type Learned = Option<(u64, Option<Identity>)>;

/// Fewer processes due for a look at once than this are looked at on the
/// calling thread, the bound `host.rs` puts on its first sights: below it
/// starting threads costs more than it saves. A look reads a process's
/// `stat`, `status`, `uid_map` and `environ`: 25-30 µs a process on the
/// benchmarks' 2-CPU VM, by the time a one-shot spent on 512 of them on
/// one thread (12-15 ms).
const SPREAD_FROM: usize = 16;

/// A probe starts once its process has initialised CUDA: found within
/// this long of its first file.
const RETRY_AFTER: Duration = Duration::from_secs(5);
/// A process with nothing to read through its view (it writes where
/// gpuscope reads, or cannot be read from here) is only checked for a
/// successor behind its PID, which NVML would have to list without a
/// tick's gap: rare enough for a minute.
const SETTLED_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Why a process's file was not read, for the probes' skip count; `None`
/// when there is nothing to say (no probe there, no permission to look).
pub type Outcome = Result<ProbeReport, Option<String>>;

/// What makes two processes see the same files: the mount namespace and
/// the root directory (a chroot in the same namespace sees other files).
#[derive(Debug, Clone, PartialEq, Eq)]
struct OwnView {
    mnt: OsString,
    root: (u64, u64),
    dir: PathBuf,
}

impl OwnView {
    /// Only when `proc_root` numbers processes as this process knows them.
    fn of(proc_root: &Path, dir: &Path) -> Option<Self> {
        if !procstat::is_own_view(proc_root) {
            return None;
        }
        let (mnt, root) = view_of(proc_root, std::process::id())?;
        Some(Self { mnt, root, dir: lexical(dir)? })
    }

    /// Whether gpuscope's own listing already holds what `pid`'s probe
    /// writes: the same files seen, the same directory chosen.
    fn covers(&self, proc_root: &Path, pid: u32, id: &Identity) -> bool {
        id.dir.as_deref() == Some(self.dir.as_path())
            && view_of(proc_root, pid).is_some_and(|(mnt, root)| mnt == self.mnt && root == self.root)
    }
}

/// A process's mount namespace and root directory.
fn view_of(proc_root: &Path, pid: u32) -> Option<(OsString, (u64, u64))> {
    let base = proc_root.join(pid.to_string());
    let mnt = std::fs::read_link(base.join("ns/mnt")).ok()?.into_os_string();
    let root = std::fs::metadata(base.join("root")).ok()?;
    Some((mnt, (root.dev(), root.ino())))
}

impl ProcessViews {
    /// `own_dir` is where gpuscope itself reads probe files.
    pub fn new(proc_root: PathBuf, own_dir: &Path) -> Self {
        let own = OwnView::of(&proc_root, own_dir);
        Self { proc_root, own, known: IntMap::default(), retry_at: IntMap::default(), spread: false }
    }

    /// Looks at many processes due at once on as many threads as there
    /// are CPUs, for a run of one snapshot, whose threads each have an
    /// allocator arena of their own (`app::one_malloc_arena`). Every other
    /// mode looks on the sampling thread: its threads share one arena,
    /// and took turns at its lock often enough that two of them used more
    /// CPU than one.
    pub fn spreading(mut self) -> Self {
        self.spread = true;
        self
    }

    /// Each process's probe file, read through its root, in the order
    /// given; a process where none was found is looked at again only after
    /// `RETRY_AFTER`, or `SETTLED_RETRY_AFTER` when there is nothing to
    /// look for, and until then is not listed. Many due at once may be
    /// looked at on as many threads as there are CPUs (`spreading`).
    pub fn read_all(&mut self, pids: impl Iterator<Item = u32>) -> Vec<Outcome> {
        let now = Instant::now();
        let due: Vec<u32> = pids.filter(|pid| self.retry_at.get(pid).is_none_or(|t| now >= *t)).collect();
        let parallel = self.spread && due.len() >= SPREAD_FROM;
        let this = &*self;
        let looked = on_threads(due, parallel, |pid| (pid, this.look(pid)));
        looked
            .into_iter()
            .map(|(pid, (outcome, learned))| {
                if let Some(entry) = learned {
                    self.known.insert(pid, entry);
                }
                match &outcome {
                    Ok(_) => {
                        self.retry_at.remove(&pid);
                    }
                    Err(_) => {
                        let settled = self.known.get(&pid).is_some_and(|(_, id)| id.is_none());
                        self.retry_at.insert(pid, now + if settled { SETTLED_RETRY_AFTER } else { RETRY_AFTER });
                    }
                }
                outcome
            })
            .collect()
    }

    /// `pid`'s file, and what was learned of it on the way, which the
    /// caller keeps: a look changes nothing here, so looks can run side by
    /// side.
    fn look(&self, pid: u32) -> (Outcome, Learned) {
        let Some(ticks) = procstat::start_ticks(&self.proc_root, pid) else { return (Err(None), None) };
        let (identity, learned) = match self.known.get(&pid).filter(|(t, _)| *t == ticks) {
            Some((_, id)) => (id.clone(), None),
            None => {
                let id = identify(&self.proc_root, pid).filter(|id| {
                    id.dir.is_some() && !self.own.as_ref().is_some_and(|own| own.covers(&self.proc_root, pid, id))
                });
                (id.clone(), Some((ticks, id)))
            }
        };
        (identity.map_or(Err(None), |id| self.read_identified(pid, ticks, &id)), learned)
    }

    fn read_identified(&self, pid: u32, ticks: u64, identity: &Identity) -> Outcome {
        let dir = identity.dir.as_deref().ok_or(None)?;
        let report = BUF.with_borrow_mut(|buf| self.read_file(pid, ticks, identity, dir, buf))?;
        // Still the same process after the read: the file was its own.
        if procstat::start_ticks(&self.proc_root, pid) != Some(ticks) {
            return Err(None);
        }
        Ok(report)
    }

    /// Forgets processes not in `pids`, so the map stays small.
    pub fn retain(&mut self, pids: &[u32]) {
        let pids: IntSet<u32> = pids.iter().copied().collect();
        self.known.retain(|pid, _| pids.contains(pid));
        self.retry_at.retain(|pid, _| pids.contains(pid));
    }

    fn read_file(&self, pid: u32, ticks: u64, id: &Identity, dir: &Path, buf: &mut Vec<u8>) -> Outcome {
        let root = DirFd::open(&self.proc_root.join(pid.to_string()).join("root")).map_err(|_| None)?;
        let probes = walk(root, dir, id.uid)?;
        let name = format!("{}-{ticks}.json", id.inner_pid);
        let file = probes.open_file(OsStr::new(&name)).map_err(|_| None)?;
        let meta = file.metadata().map_err(|_| None)?;
        let shown = || format!("{} (process {pid}): ", probes.path.join(&name).display());
        if !meta.is_file() || meta.uid() != id.uid || meta.len() > MAX_FILE_BYTES {
            return Err(Some(format!("{}not a regular file of uid {} within the size limit", shown(), id.uid)));
        }
        read_regular(&file, meta.len(), buf).map_err(|_| None)?;
        let text = std::str::from_utf8(buf).map_err(|_| Some(format!("{}not UTF-8", shown())))?;
        let mut parsed =
            ProbeFile::parse(text, id.inner_pid, ticks).map_err(|why| Some(format!("{}{why}", shown())))?;
        // Known by its PID in its own namespace; NVML and gpuscope know it
        // by this one.
        parsed.pid = pid;
        let modified = meta.modified().unwrap_or_else(|_| SystemTime::now());
        let age = SystemTime::now().duration_since(modified).unwrap_or(Duration::ZERO);
        Ok(ProbeReport { file: parsed.into(), alive: true, age })
    }
}

/// Opens `dir` (absolute, inside the process's root) one component at a
/// time without following links, calling `judge` with each directory
/// reached and how many components remain below it.
fn descend(root: DirFd, dir: &Path, mut judge: impl FnMut(&DirFd, usize) -> Result<(), Option<String>>) -> Walked {
    let names: Vec<&OsStr> = dir
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    let mut current = root;
    for (i, name) in names.iter().enumerate() {
        current = current.open_dir(name).map_err(|_| None)?;
        judge(&current, names.len() - 1 - i)?;
    }
    Ok(current)
}

/// A directory reached, or why not (`None`: nothing worth counting).
type Walked = Result<DirFd, Option<String>>;

/// `descend`, checking the last two directories as the probe does: real
/// directories of `uid`, closed to everyone else.
fn walk(root: DirFd, dir: &Path, uid: u32) -> Walked {
    descend(root, dir, |current, below| {
        if below > 1 {
            return Ok(());
        }
        let m = current.metadata().map_err(|_| None)?;
        if m.uid() != uid || m.mode() & 0o077 != 0 {
            return Err(Some(format!(
                "{} inside process root: owned by uid {} with mode {:o}, not a private directory of uid {uid}",
                dir.display(),
                m.uid(),
                m.mode() & 0o7777
            )));
        }
        Ok(())
    })
}

/// Its PIDs, user and probe directory, from `/proc/PID/status`, `uid_map`
/// and `environ`.
fn identify(proc_root: &Path, pid: u32) -> Option<Identity> {
    let base = proc_root.join(pid.to_string());
    // The name on `status`'s first line is the process's own choice of
    // bytes: read as UTF-8 it could fail the whole file.
    let status = procstat::read_up_to(&base.join("status"), usize::MAX).ok()?;
    let (inner_pid, uid) = parse_status(&String::from_utf8_lossy(&status))?;
    let inner_uid = procstat::read_up_to(&base.join("uid_map"), usize::MAX)
        .ok()
        .and_then(|m| inner_id(&String::from_utf8_lossy(&m), uid))
        .unwrap_or(uid);
    let environ = procstat::read_up_to(&base.join("environ"), MAX_ENVIRON).ok()?;
    let env = Environ(&environ);
    let runtime_owned = |runtime: &Path| runtime_dir_of(proc_root, pid, runtime, uid);
    let dir = probe_dir(&env, inner_uid, runtime_owned);
    Some(Identity { inner_pid, uid, dir })
}

/// The innermost `NSpid` (the PID its probe knows itself by) and the real
/// uid.
fn parse_status(status: &str) -> Option<(u32, u32)> {
    let field = |key: &str| status.lines().find_map(|l| l.strip_prefix(key)).map(str::split_whitespace);
    let inner_pid = field("NSpid:").and_then(|f| f.last()).and_then(|p| p.parse().ok())?;
    let uid = field("Uid:").and_then(|mut f| f.next()).and_then(|u| u.parse().ok())?;
    Some((inner_pid, uid))
}

/// `uid_map` lines are "inside outside count": the inside id of `outside`.
fn inner_id(map: &str, outside: u32) -> Option<u32> {
    map.lines().find_map(|line| {
        let mut f = line.split_whitespace().map(|n| n.parse::<u64>().ok());
        let (inside, start, count) = (f.next()??, f.next()??, f.next()??);
        let offset = u64::from(outside).checked_sub(start).filter(|o| *o < count)?;
        u32::try_from(inside + offset).ok()
    })
}

/// A process's environment as `/proc/PID/environ` holds it: `KEY=value`
/// entries, each ended by a NUL.
struct Environ<'a>(&'a [u8]);

impl<'a> Environ<'a> {
    /// The value of the first entry for `key`: CPython builds `os.environ`
    /// keeping the first of repeated keys (3.11, a process exec'd with
    /// `GPUSCOPE_PROBE_DIR` twice sees the first), and the probe reads
    /// `os.environ`. Scanned in place: a process's environment is read
    /// once, for two keys.
    fn get(&self, key: &[u8]) -> Option<&'a [u8]> {
        self.0.split(|b| *b == 0).find_map(|entry| entry.strip_prefix(key)?.strip_prefix(b"="))
    }
}

/// The probe's own choice (`_directory_plan` in assets/gpuscope_probe.py):
/// `GPUSCOPE_PROBE_DIR`, else `$XDG_RUNTIME_DIR/gpuscope/probes` when that
/// is a directory of the user's, else `/tmp/gpuscope-UID/probes`.
fn probe_dir(env: &Environ<'_>, inner_uid: u32, runtime_owned: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    let path_of = |key: &[u8]| env.get(key).filter(|v| !v.is_empty()).map(|v| PathBuf::from(OsStr::from_bytes(v)));
    if let Some(dir) = path_of(b"GPUSCOPE_PROBE_DIR") {
        // The probe makes a relative one absolute against its working
        // directory, which may have changed since: not worth a guess.
        return lexical(&dir);
    }
    if let Some(runtime) = path_of(b"XDG_RUNTIME_DIR").and_then(|r| lexical(&r))
        && runtime_owned(&runtime)
    {
        return Some(runtime.join("gpuscope").join("probes"));
    }
    Some(PathBuf::from(format!("/tmp/gpuscope-{inner_uid}/probes")))
}

/// An absolute path with `.` and `..` resolved by name, as Python's
/// `os.path.abspath` does; `..` above the root stays at the root, so
/// nothing leads out of the process's root.
fn lexical(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    Some(out)
}

/// Whether `runtime` (inside the process's root) is a directory of `uid`,
/// as the probe requires before it uses it.
fn runtime_dir_of(proc_root: &Path, pid: u32, runtime: &Path, uid: u32) -> bool {
    let Ok(root) = DirFd::open(&proc_root.join(pid.to_string()).join("root")) else { return false };
    descend(root, runtime, |_, _| Ok(())).is_ok_and(|d| d.metadata().is_ok_and(|m| m.is_dir() && m.uid() == uid))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A `/proc` of `pids`, each a process of this user whose probe writes
    /// into `probes` (through a root that is this one), started at tick
    /// `pid * 10`.
    fn fake_proc(proc_root: &Path, probes: &Path, pids: std::ops::Range<u32>) {
        let uid = crate::util::current_uid();
        for pid in pids {
            let base = proc_root.join(pid.to_string());
            std::fs::create_dir(&base).unwrap();
            let ticks = u64::from(pid) * 10;
            let stat = format!(
                "{pid} (python3) S 1 {pid} {pid} 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 {ticks} 1000 100 1 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
            );
            std::fs::write(base.join("stat"), stat).unwrap();
            std::fs::write(
                base.join("status"),
                format!("Name:\tpython3\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nNSpid:\t{pid}\n"),
            )
            .unwrap();
            std::fs::write(base.join("uid_map"), "0 0 4294967295\n").unwrap();
            std::fs::write(base.join("environ"), format!("GPUSCOPE_PROBE_DIR={}\0", probes.display())).unwrap();
            std::os::unix::fs::symlink("/", base.join("root")).unwrap();
        }
    }

    /// What a read said of each process: its file's PID, or why not.
    fn said(outcomes: &[Outcome]) -> Vec<Result<u32, Option<String>>> {
        outcomes.iter().map(|o| o.as_ref().map(|r| r.file.pid).map_err(Clone::clone)).collect()
    }

    /// Many processes seen at once (a one-shot's first sight) are looked at
    /// on several threads; what is read, what is learned and when each is
    /// looked at again are as on one thread, in the order asked.
    #[test]
    fn looks_spread_over_threads_read_and_learn_what_one_thread_does() {
        let scratch = tempfile::tempdir().unwrap();
        let probes = scratch.path().join("run").join("probes");
        std::fs::create_dir_all(&probes).unwrap();
        for d in [probes.parent().unwrap(), probes.as_path()] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        let proc_root = scratch.path().join("proc");
        std::fs::create_dir(&proc_root).unwrap();
        let pids = 1000..1000 + u32::try_from(SPREAD_FROM).unwrap() * 2;
        fake_proc(&proc_root, &probes, pids.clone());
        // Every third has a probe file; one of them is not a probe's.
        for pid in pids.clone().step_by(3) {
            let ticks = u64::from(pid) * 10;
            let text = if pid == 1003 { "{ not json".to_owned() } else { super::super::file::sample_json(pid, ticks) };
            std::fs::write(probes.join(format!("{pid}-{ticks}.json")), text).unwrap();
        }
        // Asked out of order, with a PID that runs nothing.
        let asked: Vec<u32> = pids.clone().rev().chain([99]).collect();
        let own_dir = scratch.path().join("elsewhere");
        let mut spread = ProcessViews::new(proc_root.clone(), &own_dir).spreading();
        let mut alone = ProcessViews::new(proc_root.clone(), &own_dir);
        let first = said(&spread.read_all(asked.iter().copied()));
        assert_eq!(first, said(&alone.read_all(asked.iter().copied())));
        let expected: Vec<Result<u32, Option<String>>> = asked
            .iter()
            .map(|&pid| match pid {
                1003 => Err(Some(String::new())),
                99 => Err(None),
                p if (p - 1000) % 3 == 0 => Ok(p),
                _ => Err(None),
            })
            .collect();
        let blank_why = |v: Vec<Result<u32, Option<String>>>| -> Vec<_> {
            v.into_iter().map(|r| r.map_err(|why| why.map(|_| String::new()))).collect()
        };
        assert_eq!(blank_why(first), expected);
        assert_eq!(spread.known, alone.known);
        assert_eq!(spread.known.len(), pids.len(), "every process of the fake /proc identified");
        assert_eq!(spread.retry_at.keys().collect::<IntSet<_>>(), alone.retry_at.keys().collect::<IntSet<_>>());
        // Those without a file wait their turn; those read are read again.
        let again = said(&spread.read_all(asked.iter().copied()));
        let read: Vec<u32> = pids.clone().step_by(3).filter(|&p| p != 1003).rev().collect();
        assert_eq!(again, read.iter().map(|&p| Ok(p)).collect::<Vec<_>>());
    }

    #[test]
    fn status_gives_the_innermost_pid_and_the_real_uid() {
        let status = "Name:\tpython3\nUid:\t1000\t1000\t1000\t1000\nNSpid:\t48213\t57\n";
        assert_eq!(parse_status(status), Some((57, 1000)));
        let host = "Uid:\t0\t0\t0\t0\nNSpid:\t900\n";
        assert_eq!(parse_status(host), Some((900, 0)));
        assert_eq!(parse_status("Uid:\tx\nNSpid:\t1\n"), None);
    }

    #[test]
    fn a_name_of_any_bytes_does_not_hide_the_identity() {
        let proc_root = tempfile::tempdir().unwrap();
        let base = proc_root.path().join("48213");
        std::fs::create_dir(&base).unwrap();
        std::fs::write(base.join("status"), b"Name:\tpy\xff\xfe\nUid:\t1000\t1000\t1000\t1000\nNSpid:\t48213\t57\n")
            .unwrap();
        std::fs::write(base.join("uid_map"), "         0     1000      1\n").unwrap();
        std::fs::write(base.join("environ"), "GPUSCOPE_PROBE_DIR=/scratch/probes\0").unwrap();
        let id = identify(proc_root.path(), 48213).unwrap();
        assert_eq!((id.inner_pid, id.uid, id.dir.as_deref()), (57, 1000, Some(Path::new("/scratch/probes"))));
    }

    #[test]
    fn uid_maps_translate_the_outside_id() {
        let map = "         0     100000      65536\n";
        assert_eq!(inner_id(map, 100_000), Some(0));
        assert_eq!(inner_id(map, 101_000), Some(1000));
        assert_eq!(inner_id(map, 1000), None);
        assert_eq!(inner_id("0 0 4294967295\n", 1000), Some(1000));
        assert_eq!(inner_id("garbage", 1), None);
    }

    #[test]
    fn the_probe_directory_is_chosen_as_the_probe_chooses_it() {
        let env = |pairs: &[(&str, &str)]| -> Vec<u8> {
            pairs.iter().map(|(k, v)| format!("{k}={v}\0")).collect::<String>().into()
        };
        let dir = |raw: &[u8], uid, owned: fn(&Path) -> bool| probe_dir(&Environ(raw), uid, owned);
        let owned = |_: &Path| true;
        let not_owned = |_: &Path| false;
        assert_eq!(dir(&env(&[]), 1000, owned), Some(PathBuf::from("/tmp/gpuscope-1000/probes")));
        let xdg = env(&[("XDG_RUNTIME_DIR", "/run/user/1000")]);
        assert_eq!(dir(&xdg, 1000, owned), Some(PathBuf::from("/run/user/1000/gpuscope/probes")));
        assert_eq!(dir(&xdg, 1000, not_owned), Some(PathBuf::from("/tmp/gpuscope-1000/probes")));
        let shared = env(&[("GPUSCOPE_PROBE_DIR", "/shared/../scratch/./probes"), ("XDG_RUNTIME_DIR", "/run/user/1")]);
        assert_eq!(dir(&shared, 0, owned), Some(PathBuf::from("/scratch/probes")));
        assert_eq!(dir(&env(&[("GPUSCOPE_PROBE_DIR", "relative/probes")]), 0, owned), None);
    }

    #[test]
    fn a_process_that_sees_our_files_and_writes_where_we_read_needs_no_view() {
        let ours = Path::new("/run/user/0/gpuscope/probes");
        let own = OwnView::of(Path::new("/proc"), Path::new("/run/user/0/gpuscope/../gpuscope/probes")).unwrap();
        assert_eq!(own.dir, ours, "compared by name, as the probe's choice is");
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        let id = |dir: &str| Identity { inner_pid: pid, uid: 0, dir: Some(PathBuf::from(dir)) };
        let covered = own.covers(Path::new("/proc"), pid, &id("/run/user/0/gpuscope/probes"));
        let elsewhere = own.covers(Path::new("/proc"), pid, &id("/tmp/gpuscope-0/probes"));
        let _ = child.kill();
        let _ = child.wait();
        assert!(covered, "same mount namespace, same root, same directory");
        assert!(!elsewhere, "another directory is read through the view");
        assert!(!own.covers(Path::new("/proc"), pid, &id("/run/user/0/gpuscope/probes")), "gone: unknown");

        let other_mounts = OwnView { mnt: "mnt:[1]".into(), ..own.clone() };
        assert!(!other_mounts.covers(Path::new("/proc"), std::process::id(), &id("/run/user/0/gpuscope/probes")));
        let fake_proc = tempfile::tempdir().unwrap();
        assert_eq!(OwnView::of(fake_proc.path(), ours), None, "a /proc that is not this namespace's tells nothing");
        assert_eq!(OwnView::of(Path::new("/proc"), Path::new("relative/probes")), None);
    }

    #[test]
    fn dot_dot_never_climbs_out_of_the_root() {
        assert_eq!(lexical(Path::new("/../../etc/../tmp")), Some(PathBuf::from("/tmp")));
        assert_eq!(lexical(Path::new("/a/b/../../../..")), Some(PathBuf::from("/")));
    }

    #[test]
    fn environ_is_split_on_nul_and_the_first_equals_sign() {
        let env = Environ(b"A=1\0B=x=y\0broken\0\0C=\0AB=2\0");
        assert_eq!(env.get(b"B"), Some(&b"x=y"[..]));
        assert_eq!(env.get(b"C"), Some(&b""[..]));
        assert_eq!(env.get(b"AB"), Some(&b"2"[..]), "a key is not a prefix of another");
        assert_eq!(env.get(b"broken"), None);
        assert_eq!(env.get(b""), None);
    }

    #[test]
    fn of_a_repeated_key_the_first_counts_as_in_python() {
        let env = Environ(b"GPUSCOPE_PROBE_DIR=/first\0GPUSCOPE_PROBE_DIR=/second\0");
        assert_eq!(probe_dir(&env, 0, |_| true), Some(PathBuf::from("/first")));
    }
}
