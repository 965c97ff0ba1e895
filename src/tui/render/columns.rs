//! The process table's columns: widths, alignment, and which give way
//! first as the terminal narrows. COMMAND takes whatever is left. Without
//! any probe on screen, the allocator columns would only say "n/a", so
//! they go first. WORKLOAD appears only when some process is in a
//! container, pod or Slurm job, and is the first to go after those; UTIL%
//! and GMBW% only when some row's GPU samples its processes; DATA% only
//! when some process's probe measures its DataLoader wait.

use crate::model::{ProbeState, Workload};
use crate::tui::render::format::{NA, or_na_into, push_duration_short};
use crate::tui::rows::{Column, Row, Share};
use crate::util::units::{push_bytes, push_fixed};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    pub column: Column,
    pub width: usize,
    pub right: bool,
    /// Higher stays longer.
    priority: u8,
    allocator: bool,
}

const fn spec(column: Column, width: usize, right: bool, priority: u8, allocator: bool) -> Spec {
    Spec { column, width, right, priority, allocator }
}

/// `slurm:1234567.0` and `pod:` or 12 hex digits fit; longer job ids are cut.
const WORKLOAD: Spec = spec(Column::Workload, 16, false, 0, false);
/// `127/256`.
const RANK: Spec = spec(Column::Rank, 7, true, 3, false);
const PINNED: Spec = spec(Column::Pinned, 9, true, 1, false);
/// Which process works the GPU outlasts its host figures; its share of
/// the memory bandwidth gives way before them.
const UTIL: Spec = spec(Column::Util, 6, true, 8, false);
const MEM_BW: Spec = spec(Column::MemBw, 6, true, 4, false);
/// Where a probe measures it, whether a job waits for its data outlasts
/// its fragmentation: the one says why a GPU idles, the other only
/// sometimes why an allocation fails.
const DATA_WAIT: Spec = spec(Column::DataWait, 6, true, 10, false);

/// Which optional columns some row on screen has a value for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Present {
    /// Any process has allocator figures.
    pub probed: bool,
    pub workloads: bool,
    pub ranks: bool,
    pub pinned: bool,
    /// Some row's GPU samples its processes' shares.
    pub shares: bool,
    /// Some process's probe measures how long it waits for its data.
    pub data_wait: bool,
}

impl Present {
    pub fn of(rows: &[Row]) -> Self {
        let allocators = || rows.iter().filter_map(|r| r.process.allocator.as_ref());
        Self {
            probed: rows.iter().any(|r| r.device.is_some()),
            workloads: rows.iter().any(|r| r.process.workload.is_some()),
            ranks: allocators().any(|a| a.rank.is_some()),
            pinned: allocators().any(|a| a.pinned_host.is_some()),
            shares: rows.iter().any(|r| r.share != Share::Unsampled),
            data_wait: rows.iter().any(|r| r.data_wait().is_some()),
        }
    }
}

/// In display order.
const SPECS: [Spec; 12] = [
    spec(Column::Gpu, 3, true, 15, false),
    spec(Column::Pid, 8, true, 16, false),
    spec(Column::User, 9, false, 13, false),
    spec(Column::Type, 4, false, 1, false),
    spec(Column::GpuMem, 9, true, 14, false),
    spec(Column::Alloc, 9, true, 12, true),
    spec(Column::Reserved, 9, true, 11, true),
    spec(Column::Frag, 5, true, 9, true),
    spec(Column::Peak, 9, true, 2, true),
    spec(Column::Cpu, 6, true, 7, false),
    spec(Column::HostMem, 9, true, 6, false),
    spec(Column::Time, 6, true, 5, false),
];

/// The selection mark and the alert mark before every row.
pub const MARKER: usize = 2;
const COMMAND_MIN: usize = 16;

/// The columns that fit in `width`, and COMMAND's width; WORKLOAD, RANK,
/// PINNED, UTIL%, GMBW% and DATA% only when some row has one.
pub fn choose(width: usize, present: Present) -> (Vec<Spec>, usize) {
    let probed = present.probed;
    let mut specs: Vec<Spec> = Vec::with_capacity(SPECS.len() + 6);
    for s in SPECS {
        // The GPU's shares, then how long the job waits to feed it,
        // before the host's figures.
        if s.column == Column::Cpu && present.shares {
            specs.extend([UTIL, MEM_BW]);
        }
        if s.column == Column::Cpu && present.data_wait {
            specs.push(DATA_WAIT);
        }
        specs.push(s);
        // RANK beside the user, PINNED beside the peak.
        if s.column == Column::User && present.ranks {
            specs.push(RANK);
        }
        if s.column == Column::Peak && present.pinned {
            specs.push(PINNED);
        }
    }
    if present.workloads {
        specs.push(WORKLOAD);
    }
    // Columns that could only say "n/a" go first, then WORKLOAD, then
    // the rest by priority.
    let rank = |s: &Spec| match s.column {
        _ if s.allocator && !probed => 0,
        Column::Workload => 1,
        _ => u16::from(s.priority) + 2,
    };
    let used = |specs: &[Spec]| MARKER + specs.iter().map(|s| s.width + 1).sum::<usize>();
    while used(&specs) + COMMAND_MIN > width && specs.len() > 1 {
        let (at, _) = specs.iter().enumerate().min_by_key(|(_, s)| rank(s)).unwrap_or((0, &specs[0]));
        specs.remove(at);
    }
    let command = width.saturating_sub(used(&specs));
    (specs, command)
}

/// A row's value in `column`, onto the end of `out`: the table writes
/// every cell of a row through one buffer, the figures from integers.
pub fn cell_into(out: &mut String, row: &Row, column: Column, now_ms: u64) {
    let dev = row.device;
    let p = row.process;
    let stale = p.allocator.as_ref().is_some_and(|a| a.state != ProbeState::Fresh);
    // Figures from a quiet or exited probe are last words, marked so.
    let alloc = |out: &mut String, v: Option<u64>| match v {
        Some(b) => {
            push_bytes(out, b);
            if stale {
                out.push('?');
            }
        }
        None => out.push_str(NA),
    };
    let mut digits = itoa::Buffer::new();
    match column {
        // "0:4": MIG device 4 of GPU 0, as in `-1`.
        Column::Gpu => {
            out.push_str(digits.format(row.key.gpu));
            if let Some(m) = row.gpu.mig_device {
                out.push(':');
                out.push_str(digits.format(m));
            }
        }
        Column::Pid => out.push_str(digits.format(row.key.pid)),
        Column::User => out.push_str(p.user.as_deref().unwrap_or(NA)),
        Column::Type => out.push_str(row.gpu.kind.short()),
        Column::GpuMem => or_na_into(out, row.gpu.used_memory, push_bytes),
        Column::Alloc => alloc(out, dev.and_then(|d| d.allocated)),
        Column::Reserved => alloc(out, dev.and_then(|d| d.reserved)),
        Column::Frag => or_na_into(out, dev.and_then(|d| d.fragmentation), |out, f| {
            push_fixed(out, f * 100.0, false);
            out.push('%');
        }),
        Column::Peak => alloc(out, dev.and_then(|d| d.allocated_peak)),
        Column::Cpu => or_na_into(out, p.cpu_percent, |out, c| push_fixed(out, c, true)),
        Column::HostMem => or_na_into(out, p.host_memory, push_bytes),
        Column::Time => or_na_into(out, p.start_time.as_ref(), |out, t| {
            push_duration_short(out, now_ms.saturating_sub(t.time_unix_ms));
        }),
        Column::Workload => out.push_str(&p.workload.as_deref().map_or_else(|| "-".into(), Workload::tag)),
        Column::Rank => match p.allocator.as_ref().map(|a| (a.rank, a.world_size)) {
            Some((Some(rank), world)) => {
                out.push_str(digits.format(rank));
                if let Some(world) = world {
                    out.push('/');
                    out.push_str(digits.format(world));
                }
            }
            _ => out.push('-'),
        },
        Column::Pinned => alloc(out, p.allocator.as_ref().and_then(|a| a.pinned_host)),
        Column::Util | Column::MemBw => match row.share {
            Share::Sample(u) => out.push_str(digits.format(if column == Column::Util { u.sm } else { u.memory })),
            Share::NoSample => out.push('-'),
            Share::Unsampled => out.push_str(NA),
        },
        // `-`: no probe figure (no probe, no DataLoader, under a second
        // of batches), as for a share NVML has no sample of.
        Column::DataWait => match row.data_wait() {
            Some(w) => push_fixed(out, w * 100.0, false),
            None => out.push('-'),
        },
        // A host PID seen from a container: NVML's name is all there is.
        Column::Command if p.other_namespace => {
            out.push_str("[host] ");
            out.push_str(row.command().unwrap_or(""));
        }
        Column::Command => out.push_str(row.command().unwrap_or(NA)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probed() -> Present {
        Present { probed: true, ..Present::default() }
    }

    fn all() -> Present {
        Present { probed: true, workloads: true, ..Present::default() }
    }

    #[test]
    fn rank_and_pinned_show_only_when_some_row_has_them() {
        let every = Present { probed: true, workloads: true, ranks: true, pinned: true, ..Present::default() };
        let (specs, _) = choose(220, every);
        let n = names(&specs);
        assert_eq!(&n[..4], ["GPU", "PID", "USER", "RANK"]);
        assert!(n.windows(2).any(|w| w == ["PEAK", "PINNED"]), "{n:?}");
        assert!(!names(&choose(220, probed()).0).contains(&"RANK"));
        // At 80 columns RANK outlasts TYPE, PEAK and PINNED.
        let (narrow, _) = choose(80, every);
        assert!(!names(&narrow).contains(&"PINNED"));
    }

    #[test]
    fn the_gpu_shares_show_only_where_some_row_s_gpu_samples_them() {
        let shares = Present { shares: true, ..Present::default() };
        let wide = names(&choose(200, shares).0);
        assert!(wide.windows(3).any(|w| w == ["UTIL%", "GMBW%", "CPU%"]), "{wide:?}");
        assert!(!names(&choose(200, Present::default()).0).contains(&"UTIL%"));
        // At 80 columns UTIL% outlasts TYPE, GMBW% and TIME, and the host's
        // figures.
        let (narrow, command) = choose(80, shares);
        assert_eq!(names(&narrow), ["GPU", "PID", "USER", "GPU MEM", "UTIL%", "CPU%", "HOST MEM"]);
        assert!(command >= COMMAND_MIN);
    }

    #[test]
    fn a_share_reads_as_nvidia_smi_pmon_writes_it() {
        use crate::model::{Process, ProcessGpu, ProcessType, ProcessUtilization};
        use crate::tui::rows::RowKey;
        let p = Process::bare(7);
        let g =
            ProcessGpu { index: 0, kind: ProcessType::Compute, used_memory: None, mig_device: None, mig_uuid: None };
        let u = ProcessUtilization { pid: 7, sm: 57, memory: 20, encoder: 0, decoder: 0 };
        let cell = |share, column| {
            let row = Row { key: RowKey { pid: 7, gpu: 0 }, process: &p, gpu: &g, device: None, share };
            let mut out = String::new();
            cell_into(&mut out, &row, column, 0);
            out
        };
        assert_eq!(
            (cell(Share::Sample(&u), Column::Util), cell(Share::Sample(&u), Column::MemBw)),
            ("57".into(), "20".into())
        );
        assert_eq!(cell(Share::NoSample, Column::Util), "-", "sampled, and nothing of it this period");
        assert_eq!(cell(Share::Unsampled, Column::MemBw), "n/a", "the GPU takes no samples");
    }

    #[test]
    fn data_wait_shows_only_where_a_probe_measures_it_and_outlasts_frag() {
        let data = Present { probed: true, data_wait: true, ..Present::default() };
        let wide = names(&choose(200, data).0);
        assert!(wide.windows(2).any(|w| w == ["DATA%", "CPU%"]), "{wide:?}");
        assert!(!names(&choose(200, probed()).0).contains(&"DATA%"));
        let (narrow, command) = choose(80, data);
        assert_eq!(names(&narrow), ["GPU", "PID", "USER", "GPU MEM", "ALLOC", "RESERVED", "DATA%"]);
        assert!(command >= COMMAND_MIN);
        // Beside the GPU's shares, after them.
        let both = names(&choose(220, Present { shares: true, ..data }).0);
        assert!(both.windows(4).any(|w| w == ["UTIL%", "GMBW%", "DATA%", "CPU%"]), "{both:?}");
    }

    #[test]
    fn a_data_wait_reads_as_a_whole_percent_or_a_dash() {
        use crate::model::{DataLoaderStats, InputPipeline, Process, ProcessGpu, ProcessType};
        use crate::tui::rows::RowKey;
        let g =
            ProcessGpu { index: 0, kind: ProcessType::Compute, used_memory: None, mig_device: None, mig_uuid: None };
        let cell = |wait: Option<Option<f64>>| {
            let mut p = Process::bare(7);
            p.input = wait.map(|w| {
                let loaders = vec![DataLoaderStats { wait_share: w, ..Default::default() }];
                std::sync::Arc::new(InputPipeline { hooked: true, loaders, ..Default::default() })
            });
            let row =
                Row { key: RowKey { pid: 7, gpu: 0 }, process: &p, gpu: &g, device: None, share: Share::Unsampled };
            let mut out = String::new();
            cell_into(&mut out, &row, Column::DataWait, 0);
            out
        };
        assert_eq!(cell(Some(Some(0.414))), "41");
        assert_eq!(cell(Some(Some(1.0))), "100");
        assert_eq!(cell(Some(None)), "-", "under a second of batches");
        assert_eq!(cell(None), "-", "no probe figure");
        assert_eq!(cell(Some(Some(f64::NAN))), "-", "never a made-up figure");
    }

    fn names(specs: &[Spec]) -> Vec<&'static str> {
        specs.iter().map(|s| s.column.title()).collect()
    }

    #[test]
    fn everything_fits_when_wide() {
        let (specs, command) = choose(200, probed());
        assert_eq!(specs.len(), 12);
        let (specs, command_with) = choose(200, all());
        assert_eq!(names(&specs).last(), Some(&"WORKLOAD"));
        assert_eq!(command_with, command - 17);
        assert!(command > 60);
    }

    #[test]
    fn at_80_columns_the_allocator_figures_stay_when_there_is_a_probe() {
        let (specs, command) = choose(80, probed());
        assert_eq!(names(&specs), ["GPU", "PID", "USER", "GPU MEM", "ALLOC", "RESERVED", "FRAG"]);
        assert!(command >= COMMAND_MIN);
        let (specs, _) = choose(80, Present::default());
        assert_eq!(names(&specs), ["GPU", "PID", "USER", "TYPE", "GPU MEM", "CPU%", "HOST MEM", "TIME"]);
    }

    #[test]
    fn workload_is_the_first_column_to_go() {
        // Wide enough for every column but one more: WORKLOAD goes, TYPE
        // and PEAK stay.
        let (every, _) = choose(200, all());
        let width = MARKER + every.iter().map(|s| s.width + 1).sum::<usize>() + COMMAND_MIN - 1;
        let (specs, _) = choose(width, all());
        assert_eq!(specs.len(), 12);
        assert!(!names(&specs).contains(&"WORKLOAD"));
        let (specs, _) = choose(120, Present { workloads: true, ..Present::default() });
        assert!(names(&specs).contains(&"WORKLOAD"), "{:?}", names(&specs));
        assert!(!names(&specs).contains(&"ALLOC"), "n/a columns go before it when nothing is probed");
    }

    #[test]
    fn narrow_keeps_pid_last() {
        let (specs, command) = choose(10, all());
        assert_eq!(names(&specs), ["PID"]);
        assert_eq!(command, 0);
    }
}
