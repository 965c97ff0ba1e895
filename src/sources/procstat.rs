//! `/proc/PID/stat`, the one file that holds everything that changes about
//! a process from tick to tick: CPU time, resident memory, parent, and the
//! start time that tells a recycled PID apart. Reading it alone is one
//! open and one read, where sysinfo's refresh opens the process directory
//! and reads `status`, `stat` and `statm` for every PID on every tick.
//! Field numbers are those of proc_pid_stat(5). A process followed from
//! tick to tick is cheaper still through `Tracked`.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// The state letter (field 3): `Z` for a zombie, `X` dead.
    pub state: u8,
    pub parent: u32,
    /// User plus system time, in clock ticks.
    pub cpu_ticks: u64,
    /// Since boot, in clock ticks.
    pub start_ticks: u64,
    pub rss_pages: u64,
}

impl Stat {
    /// A zombie (`Z`) or dead (`X`): it has exited, reaped or not.
    pub fn exited(&self) -> bool {
        matches!(self.state, b'Z' | b'X')
    }
}

/// An open `/proc/PID/stat`. It stays bound to the process it was opened
/// for: once that process has exited, reads fail even if the PID has been
/// reused.
#[derive(Debug)]
struct StatFile(File);

/// `proc_root/PID/name`.
pub fn pid_file(proc_root: &Path, pid: u32, name: &str) -> PathBuf {
    let mut path = proc_root.to_path_buf();
    path.push(pid.to_string());
    path.push(name);
    path
}

/// A small file whole, at most `limit` bytes of it: one read into a buffer
/// with room, and one more that finds the end (`bounded_read::read_into`).
/// `std::fs::read` sizes its buffer by `statx`, and procfs says 0, so it
/// starts with a 32-byte read and doubles: eight reads and a `statx` for a
/// `status`, where `environ` walks the process's memory again on each
/// (environ_read in fs/proc/base.c). Counted by strace in a one-shot at
/// 8 x 512: 34 reads and 5 `statx` a process before, 12 reads and 1
/// `statx` now.
pub fn read_up_to(path: &Path, limit: usize) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    crate::util::bounded_read::read_into(File::open(path)?, &mut buf, limit, None)?;
    Ok(buf)
}

/// A small text file of the kernel's (`/proc`, `/sys`, cgroupfs): at most
/// `SMALL_TEXT` bytes of UTF-8, else `None`.
pub fn read_small_text(path: &Path) -> Option<String> {
    String::from_utf8(read_up_to(path, SMALL_TEXT).ok()?).ok()
}

/// Larger than any of the small files gpuscope reads; more is not one.
pub const SMALL_TEXT: usize = 64 * 1024;

/// "No such process": the file is gone, or (for a process reaped after
/// the open) its reads fail with ESRCH.
pub fn gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH)
}

impl StatFile {
    fn open(proc_root: &Path, pid: u32) -> Option<Self> {
        Self::open_checked(proc_root, pid).ok().flatten()
    }

    fn open_checked(proc_root: &Path, pid: u32) -> io::Result<Option<Self>> {
        match File::open(pid_file(proc_root, pid, "stat")) {
            Ok(file) => Ok(Some(Self(file))),
            Err(e) if gone(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `buf` is reused between calls.
    fn read(&self, buf: &mut Vec<u8>) -> Option<Stat> {
        self.read_checked(buf).ok().flatten()
    }

    fn read_checked(&self, buf: &mut Vec<u8>) -> io::Result<Option<Stat>> {
        // Longer than any stat line: 52 numbers and a 16-byte name.
        buf.resize(1024, 0);
        // What was read, and nothing of an earlier line: a failed read
        // leaves nothing, which parses as nothing.
        let read = self.0.read_at(buf, 0);
        buf.truncate(read.as_ref().map_or(0, |n| *n));
        match read {
            Ok(_) => Ok(parse(buf)),
            Err(e) if gone(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A process followed from tick to tick for its two changing figures
/// without `stat`: CPU time from its CPU-time clock (`clock_gettime` on
/// `clock_getcpuclockid(3)`'s clock, the whole thread group's time in
/// nanoseconds, as `stat`'s utime + stime are), and resident memory from
/// `/proc/PID/statm` held open (7 numbers to format, where `stat` has 52).
/// The two take half the kernel's time of one `stat` read (0.44 against
/// 0.89 ms for 512 processes on the 2-core VM). The clock is read first:
/// a `statm` read that then succeeds shows the process still unreaped, so
/// its PID was not anyone else's when the clock was read. The parent,
/// which `stat` also gave, changes only when the parent exits; the caller
/// watches the parents instead (see `ProcHost`).
#[derive(Debug)]
pub struct Tracked {
    statm: File,
    clock: libc::clockid_t,
}

/// One reading of a `Tracked` process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub cpu_ns: u64,
    pub rss_pages: u64,
}

impl Tracked {
    /// Opened for `pid` under the real `/proc` only: the clock is asked by
    /// PID, which means this process's own numbering alone.
    pub fn open(pid: u32) -> Option<Self> {
        let statm = File::open(pid_file(Path::new("/proc"), pid, "statm")).ok()?;
        let mut clock: libc::clockid_t = 0;
        let pid = libc::pid_t::try_from(pid).ok()?;
        // SAFETY: writes the one clock id it is given.
        (unsafe { libc::clock_getcpuclockid(pid, &mut clock) } == 0).then_some(Self { statm, clock })
    }

    /// `None` once the process is gone (or a zombie, whose clock is gone).
    pub fn read(&self, buf: &mut Vec<u8>) -> Option<Usage> {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: writes the one timespec it is given.
        if unsafe { libc::clock_gettime(self.clock, &mut t) } != 0 {
            return None;
        }
        let cpu_ns =
            u64::try_from(t.tv_sec).ok()?.saturating_mul(1_000_000_000).saturating_add(u64::try_from(t.tv_nsec).ok()?);
        buf.resize(256, 0);
        let n = self.statm.read_at(buf, 0).ok()?;
        // size resident shared text lib data dt, in pages (proc(5)); a
        // zombie's are all 0, and its clock already failed above.
        let resident = std::str::from_utf8(buf.get(..n)?).ok()?.split_ascii_whitespace().nth(1)?.parse().ok()?;
        Some(Usage { cpu_ns, rss_pages: resident })
    }
}

/// Opens, reads and closes `/proc/PID/stat` under `proc_root`; `None` when
/// the process is gone or the file is not what Linux writes.
pub fn read(proc_root: &Path, pid: u32) -> Option<Stat> {
    read_into(proc_root, pid, &mut Vec::new())
}

/// `read`, leaving the line read in `buf` (for `name_in`).
pub fn read_into(proc_root: &Path, pid: u32, buf: &mut Vec<u8>) -> Option<Stat> {
    StatFile::open(proc_root, pid)?.read(buf)
}

/// The name in a `stat` line (field 2, the kernel's `comm`: at most 15
/// bytes, between the first '(' and the last ')'), as written.
pub fn name_in(stat: &[u8]) -> Option<String> {
    let open = stat.iter().position(|&b| b == b'(')?;
    let close = stat.iter().rposition(|&b| b == b')')?;
    stat.get(open + 1..close).map(|name| String::from_utf8_lossy(name).into_owned())
}

/// The real user ID of `/proc/PID/status` (its `Uid:` line holds the real,
/// effective, saved and filesystem IDs); `None` when the process is gone.
pub fn real_uid(proc_root: &Path, pid: u32) -> Option<u32> {
    let status = read_up_to(&pid_file(proc_root, pid, "status"), usize::MAX).ok()?;
    uid_in(&status)
}

/// The real user ID in a `status` already read.
pub fn uid_in(status: &[u8]) -> Option<u32> {
    let line = status.split(|&b| b == b'\n').find_map(|l| l.strip_prefix(b"Uid:"))?;
    std::str::from_utf8(line).ok()?.split_whitespace().next()?.parse().ok()
}

/// The arguments of `/proc/PID/cmdline`, each with surrounding ASCII
/// whitespace trimmed and empty ones left out (as sysinfo, which gpuscope
/// used before, gives them); none for a kernel thread, a zombie or a
/// process gone.
pub fn command_line(proc_root: &Path, pid: u32) -> Vec<String> {
    read_up_to(&pid_file(proc_root, pid, "cmdline"), usize::MAX).map(|raw| arguments(&raw)).unwrap_or_default()
}

fn arguments(raw: &[u8]) -> Vec<String> {
    (raw.split(|&b| b == 0).map(<[u8]>::trim_ascii))
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// `read`, telling "no such process" (`Ok(None)`) from "could not tell"
/// (`Err`: out of descriptors, say), which must never pass for gone.
pub fn read_checked(proc_root: &Path, pid: u32) -> io::Result<Option<Stat>> {
    match StatFile::open_checked(proc_root, pid)? {
        Some(file) => file.read_checked(&mut Vec::new()),
        None => Ok(None),
    }
}

/// A process is identified by PID *and* start time, so a recycled PID never
/// inherits another process's figures. `None` when there is no such process.
pub fn start_ticks(proc_root: &Path, pid: u32) -> Option<u64> {
    read(proc_root, pid).map(|s| s.start_ticks)
}

pub fn parse(stat: &[u8]) -> Option<Stat> {
    let (state, mut field) = fields(stat)?;
    let parent = field.at(4)?;
    let utime = field.at(14)?;
    let stime = field.at(15)?;
    let start_ticks = field.at(22)?;
    let rss_pages = field.at(24)?;
    Some(Stat {
        state,
        parent: u32::try_from(parent).ok()?,
        cpu_ticks: utime.saturating_add(stime),
        start_ticks,
        rss_pages,
    })
}

/// What the input view reads of a worker or thread each tick, one `stat`
/// read for all of it: `stat`'s figures, and three that `Stat` leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskStat {
    pub state: u8,
    pub parent: u32,
    pub cpu_ticks: u64,
    pub start_ticks: u64,
    /// Field 39, "CPU number last executed on" (since Linux 2.2.8).
    pub last_cpu: Option<u32>,
    /// Field 42, "aggregated block I/O delays, measured in clock ticks"
    /// (since 2.6.18): 0 where delay accounting is off.
    pub blkio_ticks: Option<u64>,
    /// Field 52, "the thread's exit status in the form reported by
    /// waitpid(2)" (since 3.5): 0 unless the reader may ptrace the task.
    pub exit_code: Option<u64>,
}

pub fn parse_task(stat: &[u8]) -> Option<TaskStat> {
    let (state, mut field) = fields(stat)?;
    let parent = u32::try_from(field.at(4)?).ok()?;
    let cpu_ticks = field.at(14)?.saturating_add(field.at(15)?);
    let start_ticks = field.at(22)?;
    let last_cpu = field.at(39).and_then(|c| u32::try_from(c).ok());
    let blkio_ticks = field.at(42);
    let exit_code = field.at(52);
    Some(TaskStat { state, parent, cpu_ticks, start_ticks, last_cpu, blkio_ticks, exit_code })
}

/// The state letter and the numbered fields after it of a `stat` line.
/// The command name (field 2) is in parentheses and may itself contain
/// spaces, parentheses and bytes that are not UTF-8: fields count from
/// the last ')'.
fn fields(stat: &[u8]) -> Option<(u8, Fields<'_>)> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let state = *rest.trim_start().as_bytes().first()?;
    // `rest` starts at field 3.
    Some((state, Fields { fields: rest.split_whitespace(), next: 3 }))
}

/// Numbered fields, asked for in ascending order.
struct Fields<'a> {
    fields: std::str::SplitWhitespace<'a>,
    next: usize,
}

impl Fields<'_> {
    /// Field `n` as a number; `None` past the end, for a field that is not
    /// one, and for one asked out of order.
    fn at(&mut self, n: usize) -> Option<u64> {
        let skip = n.checked_sub(self.next)?;
        self.next = n + 1;
        self.fields.nth(skip)?.parse().ok()
    }
}

/// The share of `seconds` that `used_ns` of CPU time is, in percent of one
/// CPU, at most `max_percent`, to tenths: finer is tick-rounding noise,
/// not information.
pub fn cpu_percent(used_ns: u64, seconds: f64, max_percent: f64) -> f64 {
    let used = used_ns as f64 / 1e9;
    ((used / seconds * 100.0).min(max_percent) * 10.0).round() / 10.0
}

/// The executable's name as the kernel keeps it (`/proc/PID/comm`, at
/// most 15 bytes), made safe to print; `None` when there is no such process.
pub fn comm(proc_root: &Path, pid: u32) -> Option<String> {
    let raw = read_up_to(&pid_file(proc_root, pid, "comm"), 4096).ok()?;
    let name = super::sanitize_command(String::from_utf8_lossy(&raw).trim_end_matches('\n'));
    (!name.is_empty()).then_some(name)
}

/// Clock ticks per second, as the kernel counts the times in `stat`.
pub fn ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a constant of the running system.
    let n = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    // USER_HZ is 100 on every Linux architecture in use; that is the
    // fallback should sysconf fail.
    u64::try_from(n).ok().filter(|&n| n > 0).unwrap_or(100)
}

pub fn page_size() -> u64 {
    // SAFETY: as above.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

/// Whether `proc_root` numbers processes as this process knows them (its
/// `self` is this process's own PID): only then do its PIDs, namespaces
/// and roots compare with this process's.
pub fn is_own_view(proc_root: &Path) -> bool {
    std::fs::read_link(proc_root.join("self")).ok().and_then(|me| me.to_str()?.parse::<u32>().ok())
        == Some(std::process::id())
}

/// How many processes the host source may follow through a descriptor
/// held open (`Tracked`): half the soft limit on descriptors (the rest
/// stays for everything else: probe files, the exporter's connections,
/// NVML's own), so that the common limit of 1024 holds 512 processes. The
/// others cost a whole `stat` read each tick, with its open and close.
pub fn held_stat_budget() -> usize {
    budget_for(soft_descriptor_limit())
}

/// The soft limit on open descriptors; Linux's usual 1024 where unreadable.
fn soft_descriptor_limit() -> libc::rlim_t {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the one struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 { limit.rlim_cur } else { 1024 }
}

fn budget_for(soft: libc::rlim_t) -> usize {
    usize::try_from(soft / 2).unwrap_or(usize::MAX).clamp(64, 8192)
}

/// Grows this process's descriptor table, now, to hold what the host
/// source keeps open (`held_stat_budget`, and room for the rest), up to
/// `TABLE_AHEAD` entries. Call it while the process is still one thread:
/// the kernel grows a table shared by threads only after an RCU grace
/// period (`expand_fdtable` in fs/file.c), and the table doubles from 64,
/// so a one-shot on 8 x 512 processes waited four of them, 17 ms of its
/// 107 ms on this 2-CPU VM. One table of 1024 costs the kernel 8 KiB.
pub fn reserve_descriptors() {
    let want = held_stat_budget().saturating_add(64).min(TABLE_AHEAD);
    let Ok(last) = libc::c_int::try_from(want.saturating_sub(1)) else { return };
    // A descriptor of its own to copy: standard error may be closed.
    let Ok(null) = File::open("/dev/null") else { return };
    // SAFETY: F_DUPFD_CLOEXEC copies a descriptor this function owns onto
    // the lowest free number at or above `last`, never onto one in use; the
    // copy is closed at once and its number given to no one.
    let copy = unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&null), libc::F_DUPFD_CLOEXEC, last) };
    if copy >= 0 {
        // SAFETY: `copy` was opened just above and is closed once.
        unsafe { libc::close(copy) };
    }
}

/// The most entries `reserve_descriptors` grows the table to: a node past
/// about 950 followed processes waits a grace period or two more, once.
const TABLE_AHEAD: usize = 1024;

/// Ends the process of that PID when dropped, so that a failed test
/// leaves no process of its own running.
#[cfg(test)]
pub struct Ender(pub libc::pid_t);

#[cfg(test)]
impl Drop for Ender {
    fn drop(&mut self) {
        // SAFETY: a signal to the one process the test started.
        unsafe { libc::kill(self.0, libc::SIGKILL) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_up_to_reads_every_byte_up_to_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        for len in [0, 1, 8191, 8192, 8193, 5 * 8192 + 3] {
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            std::fs::write(&path, &bytes).unwrap();
            assert_eq!(read_up_to(&path, usize::MAX).unwrap(), bytes, "{len} bytes");
            for limit in [0, 1, 100, 8192, 8192 + 7] {
                assert_eq!(read_up_to(&path, limit).unwrap(), &bytes[..len.min(limit)], "{len} bytes, limit {limit}");
            }
        }
        assert!(read_up_to(&dir.path().join("absent"), 10).is_err_and(|e| gone(&e)));
    }

    #[test]
    fn read_up_to_reads_proc_as_std_does() {
        let status = read_up_to(Path::new("/proc/self/status"), usize::MAX).unwrap();
        assert!(status.starts_with(b"Name:") && status.ends_with(b"\n"), "{}", String::from_utf8_lossy(&status));
        let environ = read_up_to(Path::new("/proc/self/environ"), usize::MAX).unwrap();
        assert_eq!(environ, std::fs::read("/proc/self/environ").unwrap());
    }

    #[test]
    fn a_tracked_process_reads_as_stat_does_until_reaped() {
        let mut child = std::process::Command::new("sh").arg("-c").arg("while :; do :; done").spawn().unwrap();
        let _spinner = Ender(i32::try_from(child.id()).unwrap());
        let tracked = Tracked::open(child.id()).unwrap();
        let mut buf = Vec::new();
        let first = tracked.read(&mut buf).unwrap();
        let tps = ticks_per_second();
        while read(Path::new("/proc"), child.id()).unwrap().cpu_ticks < first.cpu_ns / (1_000_000_000 / tps) + 10 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let later = tracked.read(&mut buf).unwrap();
        let stat = read(Path::new("/proc"), child.id()).unwrap();
        // The same counters; stat's may lag by what each CPU has not yet
        // added in (Linux 6.x sums them exactly for statm alone).
        let slack = 256 * std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        assert!(later.rss_pages > 0 && later.rss_pages.abs_diff(stat.rss_pages) <= slack, "{later:?} {stat:?}");
        let stat_ns = stat.cpu_ticks * (1_000_000_000 / tps);
        assert!(later.cpu_ns > first.cpu_ns + 50_000_000, "{first:?} {later:?}");
        // stat's times are the clock's, cut to whole ticks.
        assert!(later.cpu_ns.abs_diff(stat_ns) < 50_000_000, "clock {} ns, stat {stat_ns} ns", later.cpu_ns);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(tracked.read(&mut buf), None, "reaped: nothing more, whoever has the PID now");
        assert!(Tracked::open(u32::MAX - 3).is_none());
    }

    #[test]
    fn half_the_descriptor_limit_is_held_within_bounds() {
        assert_eq!(budget_for(1024), 512);
        assert_eq!(budget_for(20), 64, "a tiny limit still holds a few (a failed open falls back to a plain read)");
        assert_eq!(budget_for(libc::RLIM_INFINITY), 8192);
        assert!((64..=8192).contains(&held_stat_budget()));
    }

    #[test]
    fn the_descriptor_table_is_grown_ahead_to_hold_the_followed_processes() {
        let fd_size = || {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            status.lines().find_map(|l| l.strip_prefix("FDSize:")).unwrap().trim().parse::<usize>().unwrap()
        };
        let soft = usize::try_from(soft_descriptor_limit()).unwrap_or(usize::MAX);
        reserve_descriptors();
        let want = (held_stat_budget() + 64).min(TABLE_AHEAD);
        if want <= soft {
            assert!(fd_size() >= want, "FDSize {} for {want}", fd_size());
        }
    }

    #[test]
    fn parses_past_a_hostile_name() {
        let stat = b"4242 (evil) 1 2 (x\xff) S 17 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 1000 200 18446744073709551615";
        let s = parse(stat).unwrap();
        assert_eq!(s, Stat { state: b'S', parent: 17, cpu_ticks: 8, start_ticks: 987654, rss_pages: 200 });
        assert_eq!(parse(b"garbage"), None);
        assert_eq!(parse(b"1 (x) S 1 2 3"), None, "too short");
        assert_eq!(parse(b"1 (x) S -1 2 3 0 -1 0 0 0 0 0 5 3 0 0 20 0 1 0 9 1000 200"), None, "negative parent");
    }

    #[test]
    fn first_sight_fields_parse_as_linux_writes_them() {
        assert_eq!(name_in(b"4242 (evil) 1 2 (x\xff) S 17").as_deref(), Some("evil) 1 2 (x\u{fffd}"));
        assert_eq!(name_in(b"1 () S 0"), Some(String::new()));
        assert_eq!(name_in(b"1 x S 0"), None);
        assert_eq!(name_in(b"1 )x( S"), None, "a ')' before the '(' is no name");
        let status = b"Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1000\t0\t0\t0\nGid:\t5\t5\t5\t5\n";
        assert_eq!(uid_in(status), Some(1000), "the real one, not the effective 0");
        assert_eq!(uid_in(b"Name:\tx\n"), None);
        assert_eq!(uid_in(b"Uid:\tme\n"), None);
        assert_eq!(uid_in(b"Name:\tx\nUid:\t1000\t0\t1000\t1000\n"), Some(1000));
        assert_eq!(
            arguments(b"python3\0-m\0 torch.distributed.run \0\0--nproc=8\0"),
            ["python3", "-m", "torch.distributed.run", "--nproc=8"]
        );
        assert_eq!(arguments(b"no trailing nul"), ["no trailing nul"]);
        assert_eq!(arguments(b"\xff\0"), ["\u{fffd}"]);
        assert!(arguments(b"").is_empty() && arguments(b"\0 \0").is_empty());
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_parse_or_not_without_panicking(raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = parse(&raw);
            let _ = name_in(&raw);
            let _ = uid_in(&raw);
            let args = arguments(&raw);
            proptest::prop_assert!(args.iter().all(|a| !a.is_empty() && !a.contains('\0')));
        }
    }

    #[test]
    fn reads_this_process() {
        let me = read(Path::new("/proc"), std::process::id()).unwrap();
        assert!(me.start_ticks > 0 && me.rss_pages > 0);
        assert_eq!(me.parent, std::os::unix::process::parent_id());
        assert_eq!(read(Path::new("/proc"), u32::MAX - 3), None);
        assert_eq!(start_ticks(Path::new("/proc"), std::process::id()), Some(me.start_ticks));
        assert!(ticks_per_second() > 0 && page_size() >= 4096);
        let own = std::fs::read_to_string("/proc/self/comm").unwrap();
        assert_eq!(comm(Path::new("/proc"), std::process::id()).as_deref(), Some(own.trim_end()));
        assert_eq!(comm(Path::new("/proc"), u32::MAX - 3), None);
        let mut buf = Vec::new();
        assert_eq!(
            read_into(Path::new("/proc"), std::process::id(), &mut buf).map(|s| s.start_ticks),
            Some(me.start_ticks)
        );
        assert_eq!(name_in(&buf).as_deref(), Some(own.trim_end()));
        assert_eq!(real_uid(Path::new("/proc"), std::process::id()), Some(crate::util::current_uid()));
        let args: Vec<String> = std::env::args().map(|a| a.trim_ascii().to_owned()).filter(|a| !a.is_empty()).collect();
        assert_eq!(command_line(Path::new("/proc"), std::process::id()), args);
        assert!(command_line(Path::new("/proc"), u32::MAX - 3).is_empty());
        assert_eq!(real_uid(Path::new("/proc"), u32::MAX - 3), None);
    }

    #[test]
    fn an_open_file_follows_its_process_and_fails_once_it_exits() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let file = StatFile::open(Path::new("/proc"), child.id()).unwrap();
        let mut buf = Vec::new();
        let first = file.read(&mut buf).unwrap();
        assert_eq!(file.read(&mut buf).unwrap().start_ticks, first.start_ticks, "read again from the start");
        assert_eq!(first.parent, std::process::id());
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(file.read(&mut buf), None);
    }
}
