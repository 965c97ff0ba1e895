//! Memory that grows steadily for minutes. Training memory is a saw-tooth
//! (it rises within a step and falls back after), so the rule fits a line
//! through the *minimum* of each tenth of the window, the floor the
//! saw-tooth returns to, and asks for both real growth and a good fit.

use crate::util::sorted_map::SortedMap;

use super::{Inputs, ProcKey, Verdicts, device, forget_unseen, human_duration, key, process_gpus};
use crate::analysis::engine::{Raise, Verdict};
use crate::model::{AlertKind, Severity};
use crate::util::units::bytes;

const BUCKETS: u64 = 10;
const MIB: f64 = 1024.0 * 1024.0;

/// One process's floor: the minimum of each tenth of the window, kept as
/// the samples come (time-aligned tenths), so a tick costs the same
/// whatever the interval and however long the history: no rescan. Held
/// in place, a slot per tenth (the tenth's number modulo ten): no
/// allocation per process, where a growing queue took 256 bytes of heap
/// for each of 512 processes.
#[derive(Debug, Clone, Default)]
pub struct Floor {
    /// (time of its minimum, minimum) of the tenth whose number modulo ten
    /// is the slot; the tenth is the time's, so it is not kept. A slot
    /// whose tenth is ten or more before the newest's is stale.
    minima: [(u64, u64); BUCKETS as usize],
    /// Which slots ever held a minimum since the floor (re)started.
    filled: u16,
    /// The first sample with a figure since the floor (re)started.
    first_ms: Option<u64>,
    last_ms: Option<u64>,
}

impl Floor {
    /// Adds a sample; time going backwards (a clock step) starts afresh.
    pub fn push(&mut self, t_ms: u64, value: Option<u64>, window_ms: u64) {
        if self.last_ms.is_some_and(|last| last >= t_ms) {
            *self = Self::default();
        }
        let Some(v) = value else { return };
        self.first_ms.get_or_insert(t_ms);
        self.last_ms = Some(t_ms);
        let w = width(window_ms);
        let tenth = t_ms / w;
        let slot = (tenth % BUCKETS) as usize;
        let Some(held) = self.minima.get_mut(slot) else { return };
        // Empty, or a tenth ten or more back (this tenth's first figure),
        // or a new minimum of this tenth.
        if self.filled & (1 << slot) == 0 || held.0 / w != tenth || v < held.1 {
            *held = (t_ms, v);
        }
        self.filled |= 1 << slot;
    }

    /// The minima of the last ten tenths that have one, oldest first.
    fn current(&self, w: u64) -> impl Iterator<Item = (u64, u64)> + Clone + '_ {
        let newest = self.last_ms.map_or(0, |t| t / w);
        let mut held: [(u64, u64); BUCKETS as usize] = [(u64::MAX, 0); BUCKETS as usize];
        let mut n = 0;
        for (slot, m) in self.minima.iter().enumerate() {
            if self.filled & (1 << slot) != 0 && m.0 / w + BUCKETS > newest {
                held[n] = *m;
                n += 1;
            }
        }
        held[..n].sort_unstable();
        held.into_iter().take(n)
    }

    /// The line through the minima of the last ten tenths: slope in bytes
    /// per millisecond and R². `None` unless every tenth has data and the
    /// samples cover the window.
    pub fn trend(&self, window_ms: u64) -> Option<(f64, f64)> {
        let (first, last) = (self.first_ms?, self.last_ms?);
        let w = width(window_ms);
        let minima = self.current(w);
        if last.saturating_sub(first).saturating_add(w) < window_ms || minima.clone().count() < BUCKETS as usize {
            return None;
        }
        fit(minima.map(|(t, v)| (t as f64, v as f64)))
    }
}

fn width(window_ms: u64) -> u64 {
    (window_ms / BUCKETS).max(1)
}

/// Least squares through the points; a flat floor fits a flat line
/// perfectly: R² = 1 (slope 0).
fn fit(points: impl Iterator<Item = (f64, f64)> + Clone) -> Option<(f64, f64)> {
    let n = points.clone().count() as f64;
    let (mx, my) = points.clone().fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
    let (sxx, sxy, syy) = points.fold((0.0, 0.0, 0.0), |(xx, xy, yy), (x, y)| {
        (xx + (x - mx).powi(2), xy + (x - mx) * (y - my), yy + (y - my).powi(2))
    });
    if sxx == 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let r2 = if syy == 0.0 { 1.0 } else { (sxy * sxy) / (sxx * syy) };
    Some((slope, r2))
}

pub fn judge(i: &Inputs<'_>, floors: &mut SortedMap<ProcKey, Floor>, v: &mut Verdicts) {
    let c = &i.config.leak;
    let window_ms = u64::try_from(c.window.as_millis()).unwrap_or(u64::MAX);
    let min_growth = c.min_growth_mib as f64 * MIB;
    let mut seen = Vec::with_capacity(i.snap.processes.len());
    for (pk, p, gpu) in process_gpus(i.snap) {
        // Tensors' bytes from the probe, else NVML's figure for the process.
        let dev = device(p, gpu);
        let nvml = p.gpus.iter().find(|g| g.index == gpu).and_then(|g| g.used_memory);
        let floor = floors.get_or_insert_with(pk, Floor::default);
        floor.push(i.now_ms, dev.and_then(|d| d.allocated).or(nvml), window_ms);
        seen.push(pk);
        let probed = dev.is_some();
        let verdict = match floor.trend(window_ms) {
            None => Verdict::Hold,
            Some((slope, r2)) => {
                let growth = slope * window_ms as f64;
                if growth >= min_growth && r2 >= c.min_r2 {
                    let per_min = slope * 60_000.0;
                    Verdict::Raise(Raise {
                        severity: Severity::Warning,
                        value: Some(per_min / MIB),
                        threshold: Some(c.min_growth_mib as f64 * 60_000.0 / window_ms as f64),
                        message: format!(
                            "PID {} on GPU {gpu}: {} grew {} over {} ({}/min), steadily (R² {r2:.2})",
                            p.pid,
                            if probed { "allocated memory" } else { "GPU memory" },
                            bytes(growth as u64),
                            human_duration(window_ms),
                            bytes(per_min.max(0.0) as u64),
                        ),
                        hint: "Look for tensors kept across steps: a loss summed without .item() or \
                               .detach(), outputs appended to a list, caches keyed by step. Compare \
                               torch.cuda.memory_summary() at two epochs, or record \
                               torch.cuda.memory._record_memory_history() to see who allocates."
                            .into(),
                    })
                } else if growth < min_growth / 2.0 || r2 < c.min_r2 / 2.0 {
                    Verdict::Clear
                } else {
                    Verdict::Hold
                }
            }
        };
        v.insert(key(AlertKind::Leak, gpu, Some(p.pid)), verdict);
    }
    forget_unseen(floors, seen);
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    /// A training saw-tooth: +2 GiB within each 10 s step, back to the floor.
    fn sawtooth(floor_growth_per_s: u64, secs: u64) -> Vec<(u64, u64)> {
        (0..secs * 2)
            .map(|half| {
                let t = half * 500;
                let in_step = (t % 10_000) as f64 / 10_000.0;
                (t, 10 * GIB + floor_growth_per_s * t / 1000 + (in_step * 2.0 * GIB as f64) as u64)
            })
            .collect()
    }

    fn floor_trend(points: Vec<(u64, u64)>, window_ms: u64) -> Option<(f64, f64)> {
        let mut floor = Floor::default();
        for (t, v) in points {
            floor.push(t, Some(v), window_ms);
        }
        floor.trend(window_ms)
    }

    #[test]
    fn a_steady_floor_is_not_a_leak_however_big_the_sawtooth() {
        let (slope, _) = floor_trend(sawtooth(0, 300), 300_000).unwrap();
        assert!(slope.abs() * 300_000.0 < 64.0 * MIB, "{slope}");
    }

    #[test]
    fn a_rising_floor_under_the_sawtooth_is_found() {
        // 1 MiB/s: 300 MiB over five minutes.
        let (slope, r2) = floor_trend(sawtooth(1 << 20, 300), 300_000).unwrap();
        let growth = slope * 300_000.0;
        assert!((growth - 300.0 * MIB).abs() < 40.0 * MIB, "{}", growth / MIB);
        assert!(r2 > 0.9, "{r2}");
    }

    #[test]
    fn only_the_last_ten_tenths_count() {
        // A floor that fell for a window, then rose for one: the minima of
        // the fall are older than the window, and their slots are taken by
        // the rise's.
        let fall = (0..100u64).map(|s| (s * 1000, 500 * GIB - s * GIB));
        let rise = (100..200u64).map(|s| (s * 1000, 400 * GIB + (s - 100) * GIB));
        let (slope, r2) = floor_trend(fall.chain(rise).collect(), 100_000).unwrap();
        assert!((slope * 1000.0 - GIB as f64).abs() < 0.01 * GIB as f64, "{} GiB/s", slope * 1000.0 / GIB as f64);
        assert!(r2 > 0.99, "{r2}");
        // A gap of over a window leaves every slot stale: nothing to say
        // until ten tenths have data again.
        let mut floor = Floor::default();
        for s in 0..100u64 {
            floor.push(s * 1000, Some(GIB), 100_000);
        }
        assert!(floor.trend(100_000).is_some());
        floor.push(300_000, Some(GIB), 100_000);
        assert_eq!(floor.trend(100_000), None);
    }

    #[test]
    fn too_short_or_gappy_histories_say_nothing() {
        assert_eq!(floor_trend(sawtooth(1 << 20, 100), 300_000), None);
        let mut gappy = sawtooth(1 << 20, 300);
        gappy.retain(|(t, _)| !(100_000..200_000).contains(t));
        assert_eq!(floor_trend(gappy, 300_000), None);
    }
}
