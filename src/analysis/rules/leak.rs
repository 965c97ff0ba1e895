//! Memory that grows steadily for minutes. Training memory is a saw-tooth
//! (it rises within a step and falls back after), so the rule fits a line
//! through the *minimum* of each tenth of the window, the floor the
//! saw-tooth returns to, and asks for both real growth and a good fit.

use super::{Inputs, Verdicts, human_duration, key, process_gpus};
use crate::analysis::engine::{Raise, Verdict};
use crate::model::{AlertKind, Severity};
use crate::units::bytes;

const BUCKETS: u64 = 10;
const MIB: f64 = 1024.0 * 1024.0;

/// The line through per-bucket minima: slope in bytes per millisecond and
/// R². `None` unless every bucket has data (no gaps, full coverage).
/// `points` is walked in place, not collected: this runs for every process
/// on every tick, over ten minutes of samples each.
pub fn floor_trend<I>(points: I, window_ms: u64) -> Option<(f64, f64)>
where
    I: DoubleEndedIterator<Item = (u64, u64)> + Clone,
{
    let mut ends = points.clone();
    let (first, _) = ends.next()?;
    let last = ends.next_back().map_or(first, |(t, _)| t);
    if last.saturating_sub(first).saturating_add(window_ms / BUCKETS) < window_ms {
        return None;
    }
    let start = last.saturating_sub(window_ms);
    let width = (window_ms / BUCKETS).max(1);
    let mut minima = [None::<(u64, u64)>; BUCKETS as usize];
    for (t, v) in points.filter(|(t, _)| *t >= start) {
        let b = (((t - start) / width).min(BUCKETS - 1)) as usize;
        if minima[b].is_none_or(|(_, m)| v < m) {
            minima[b] = Some((t, v));
        }
    }
    let pts: Vec<(f64, f64)> =
        minima.into_iter().collect::<Option<Vec<_>>>()?.into_iter().map(|(t, v)| (t as f64, v as f64)).collect();
    let n = pts.len() as f64;
    let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / n, pts.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let syy: f64 = pts.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    // A flat floor fits a flat line perfectly; call that R² = 1 (slope 0).
    let r2 = if syy == 0.0 { 1.0 } else { (sxy * sxy) / (sxx * syy) };
    Some((slope, r2))
}

pub fn judge(i: &Inputs<'_>, v: &mut Verdicts) {
    let c = &i.config.leak;
    let window_ms = u64::try_from(c.window.as_millis()).unwrap_or(u64::MAX);
    let min_growth = c.min_growth_mib as f64 * MIB;
    for (pk, p, gpu) in process_gpus(i.snap) {
        let Some(series) = i.procs.get(&pk) else { continue };
        let points = series.recent(window_ms).filter_map(|(t, pt)| Some((*t, pt.memory?)));
        let probed = series.last().is_some_and(|(_, pt)| pt.probed);
        let verdict = match floor_trend(points, window_ms) {
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

    #[test]
    fn a_steady_floor_is_not_a_leak_however_big_the_sawtooth() {
        let (slope, _) = floor_trend(sawtooth(0, 300).into_iter(), 300_000).unwrap();
        assert!(slope.abs() * 300_000.0 < 64.0 * MIB, "{slope}");
    }

    #[test]
    fn a_rising_floor_under_the_sawtooth_is_found() {
        // 1 MiB/s: 300 MiB over five minutes.
        let (slope, r2) = floor_trend(sawtooth(1 << 20, 300).into_iter(), 300_000).unwrap();
        let growth = slope * 300_000.0;
        assert!((growth - 300.0 * MIB).abs() < 40.0 * MIB, "{}", growth / MIB);
        assert!(r2 > 0.9, "{r2}");
    }

    #[test]
    fn too_short_or_gappy_histories_say_nothing() {
        assert_eq!(floor_trend(sawtooth(1 << 20, 100).into_iter(), 300_000), None);
        let mut gappy = sawtooth(1 << 20, 300);
        gappy.retain(|(t, _)| !(100_000..200_000).contains(t));
        assert_eq!(floor_trend(gappy.into_iter(), 300_000), None);
    }
}
