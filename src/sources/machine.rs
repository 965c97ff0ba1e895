//! The machine's CPU load and memory, from `/proc/stat` and
//! `/proc/meminfo`, each held open and read again from its start every
//! tick: no open and close per tick, and only the lines gpuscope shows
//! are parsed (sysinfo opened both files each tick and parsed every CPU's
//! line, 5% of the idle dashboard's CPU time in perf).
//!
//! The figures are sysinfo's, which gpuscope showed before: used memory
//! is total less available, available falls back to free + buffers +
//! page cache + reclaimable slab − shmem on kernels before 3.14 (which
//! lack `MemAvailable`), and the CPU load is the busy share of the time
//! between two readings of the `cpu` line, idle and iowait counting as not
//! busy.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Memory figures, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    pub total: u64,
    pub available: u64,
    pub used: u64,
    pub swap_total: u64,
    pub swap_used: u64,
}

/// The `cpu` line's times, in clock ticks: all of them, and the idle ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CpuTimes {
    total: u64,
    idle: u64,
}

pub struct Machine {
    stat: Option<File>,
    meminfo: Option<File>,
    buf: Vec<u8>,
    last: Option<CpuTimes>,
}

impl Machine {
    pub fn open(proc_root: &Path) -> Self {
        Self {
            stat: File::open(proc_root.join("stat")).ok(),
            meminfo: File::open(proc_root.join("meminfo")).ok(),
            buf: Vec::new(),
            last: None,
        }
    }

    pub fn memory(&mut self) -> Option<Memory> {
        parse_meminfo(read_whole(self.meminfo.as_ref()?, &mut self.buf)?)
    }

    /// The busy share of all CPUs since the last call, in percent to a
    /// tenth; `None` the first time (no interval yet) or when unreadable.
    pub fn cpu_percent(&mut self) -> Option<f64> {
        let now = parse_cpu_line(read_whole(self.stat.as_ref()?, &mut self.buf)?)?;
        let before = self.last.replace(now)?;
        let total = now.total.saturating_sub(before.total);
        let busy = total.saturating_sub(now.idle.saturating_sub(before.idle));
        let percent = if total == 0 { 0.0 } else { (busy as f64 / total as f64 * 100.0).min(100.0) };
        Some((percent * 10.0).round() / 10.0)
    }

    /// When the machine booted, in seconds since the epoch (`btime` of
    /// `/proc/stat`): what a process's start time in ticks since boot
    /// counts from.
    pub fn boot_time(&mut self) -> Option<u64> {
        parse_btime(read_whole(self.stat.as_ref()?, &mut self.buf)?)
    }
}

/// The file from its start, whole: the buffer grows until a read leaves
/// room to spare (`/proc/stat` has a line per CPU and per interrupt).
fn read_whole<'a>(file: &File, buf: &'a mut Vec<u8>) -> Option<&'a [u8]> {
    if buf.len() < 4096 {
        buf.resize(4096, 0);
    }
    loop {
        let n = file.read_at(buf, 0).ok()?;
        if n < buf.len() {
            return Some(&buf[..n]);
        }
        // Bounded: /proc/stat on thousands of CPUs is well under this.
        if buf.len() >= 64 << 20 {
            return None;
        }
        let grown = buf.len() * 2;
        buf.resize(grown, 0);
    }
}

fn parse_meminfo(text: &[u8]) -> Option<Memory> {
    let (mut total, mut free, mut available, mut buffers, mut cached) = (None, 0, None, 0, 0);
    let (mut shmem, mut reclaimable, mut swap_total, mut swap_free) = (0, 0, 0, 0);
    for line in text.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else { continue };
        let Some(kib) = number(&line[colon + 1..]) else { continue };
        let bytes = kib.saturating_mul(1024);
        match &line[..colon] {
            b"MemTotal" => total = Some(bytes),
            b"MemFree" => free = bytes,
            b"MemAvailable" => available = Some(bytes),
            b"Buffers" => buffers = bytes,
            b"Cached" => cached = bytes,
            b"Shmem" => shmem = bytes,
            b"SReclaimable" => reclaimable = bytes,
            b"SwapTotal" => swap_total = bytes,
            b"SwapFree" => swap_free = bytes,
            _ => {}
        }
    }
    let total = total?;
    let available = available.unwrap_or_else(|| {
        free.saturating_add(buffers).saturating_add(cached).saturating_add(reclaimable).saturating_sub(shmem)
    });
    Some(Memory {
        total,
        available,
        used: total.saturating_sub(available),
        swap_total,
        swap_used: swap_total.saturating_sub(swap_free),
    })
}

/// `cpu  user nice system idle iowait irq softirq steal guest guest_nice`:
/// guest time is already inside user and nice, so it is not added again.
fn parse_cpu_line(text: &[u8]) -> Option<CpuTimes> {
    let line = text.split(|&b| b == b'\n').next()?;
    let mut fields = line.split(|&b| b == b' ').filter(|f| !f.is_empty());
    if fields.next()? != b"cpu" {
        return None;
    }
    let values: Vec<u64> = fields.take(8).map(number).collect::<Option<_>>()?;
    // Kernels before 2.6.11 have no steal, before 2.5.41 no iowait.
    if values.len() < 4 {
        return None;
    }
    let idle = values[3].saturating_add(values.get(4).copied().unwrap_or(0));
    Some(CpuTimes { total: values.iter().fold(0u64, |a, &v| a.saturating_add(v)), idle })
}

fn parse_btime(text: &[u8]) -> Option<u64> {
    number(text.split(|&b| b == b'\n').find_map(|l| l.strip_prefix(b"btime "))?).filter(|&t| t > 0)
}

/// The first decimal number in `field`, leading blanks skipped.
fn number(field: &[u8]) -> Option<u64> {
    let digits: &[u8] = field.trim_ascii_start();
    let end = digits.iter().position(|b| !b.is_ascii_digit()).unwrap_or(digits.len());
    std::str::from_utf8(&digits[..end]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MEMINFO: &str = "MemTotal:       16000000 kB\nMemFree:         2000000 kB\nMemAvailable:    9000000 kB\n\
        Buffers:          100000 kB\nCached:          6000000 kB\nSwapCached:            0 kB\nShmem:            50000 kB\n\
        SReclaimable:     300000 kB\nSwapTotal:       4000000 kB\nSwapFree:        3000000 kB\nHugePages_Total:       0\n";

    #[test]
    fn memory_as_sysinfo_counted_it() {
        let m = parse_meminfo(MEMINFO.as_bytes()).expect("parses");
        assert_eq!(m.total, 16_000_000 * 1024);
        assert_eq!(m.available, 9_000_000 * 1024);
        assert_eq!(m.used, 7_000_000 * 1024);
        assert_eq!((m.swap_total, m.swap_used), (4_000_000 * 1024, 1_000_000 * 1024));
    }

    #[test]
    fn without_mem_available_it_is_estimated() {
        let old: String =
            MEMINFO.lines().filter(|l| !l.starts_with("MemAvailable")).map(|l| format!("{l}\n")).collect();
        let m = parse_meminfo(old.as_bytes()).expect("parses");
        assert_eq!(m.available, (2_000_000 + 100_000 + 6_000_000 + 300_000 - 50_000) * 1024);
        assert_eq!(parse_meminfo(b"MemFree: 1 kB\n"), None, "no total, no figures");
    }

    #[test]
    fn cpu_load_is_the_busy_share_between_readings() {
        let a = parse_cpu_line(b"cpu  100 10 50 800 40 0 0 0 5 0\ncpu0 1 2 3 4\nintr 1 2 3\n").expect("parses");
        let b = parse_cpu_line(b"cpu  160 10 70 900 60 0 0 0 9 0\ncpu0 1 2 3 4\n").expect("parses");
        assert_eq!(a, CpuTimes { total: 1000, idle: 840 });
        assert_eq!(b, CpuTimes { total: 1200, idle: 960 });
        assert_eq!(parse_cpu_line(b"cpu0 1 2 3 4\n"), None, "the aggregate line comes first");
        assert_eq!(parse_cpu_line(b"cpu  1 2 3\n"), None);
    }

    #[test]
    fn this_machine() {
        let mut m = Machine::open(Path::new("/proc"));
        let mem = m.memory().expect("/proc/meminfo");
        assert!(mem.total > 0 && mem.available <= mem.total && mem.used == mem.total - mem.available);
        assert_eq!(m.cpu_percent(), None, "no interval before a second reading");
        std::hint::black_box((0..1_000_000u64).sum::<u64>());
        assert!(m.cpu_percent().is_some_and(|p| (0.0..=100.0).contains(&p)));
        let mut missing = Machine::open(Path::new("/nonexistent"));
        assert_eq!((missing.memory(), missing.cpu_percent(), missing.cpu_percent()), (None, None, None));
    }

    #[test]
    fn the_boot_time_is_btime() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("stat"), "cpu  1 2 3\nintr 5\nbtime 1764230400\nprocesses 9\n").unwrap();
        assert_eq!(Machine::open(dir.path()).boot_time(), Some(1_764_230_400));
        std::fs::write(dir.path().join("stat"), "cpu  1 2 3\nbtime x\n").unwrap();
        assert_eq!(Machine::open(dir.path()).boot_time(), None);
        assert!(Machine::open(Path::new("/proc")).boot_time().is_some_and(|t| t > 1_000_000_000));
    }

    proptest! {
        #[test]
        fn any_text_parses_or_not_without_panicking(text in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_meminfo(&text);
            let _ = parse_cpu_line(&text);
            let _ = parse_btime(&text);
        }

        #[test]
        fn meminfo_lines_in_any_order(mut lines in Just(MEMINFO.lines().map(String::from).collect::<Vec<_>>()).prop_shuffle()) {
            lines.push(String::new());
            prop_assert_eq!(parse_meminfo(lines.join("\n").as_bytes()), parse_meminfo(MEMINFO.as_bytes()));
        }
    }
}
