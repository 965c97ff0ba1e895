//! Memory trapped in partly used segments: the median of inactive split /
//! reserved over a window, judged only on processes where it is big enough
//! to cause an OOM (thresholds in `analysis::config`). The median is of the store's samples over
//! the window: raw or one-second buckets at the default window, each
//! bucket's mean weighted by its samples, so a tick's cost depends on the
//! window, never on the interval.

use super::{Inputs, Verdicts, device, key, pct, process_gpus};
use crate::analysis::engine::{Raise, Verdict};
use crate::history::process::FRAGMENTATION;
use crate::model::{AlertKind, Severity};
use crate::util::units::bytes;

const MIB: u64 = 1 << 20;

pub fn judge(i: &Inputs<'_>, v: &mut Verdicts) {
    let c = &i.config.fragmentation;
    let window_ms = u64::try_from(c.window.as_millis()).unwrap_or(u64::MAX);
    let (min_reserved, min_split) = (c.min_reserved_mib * MIB, c.min_inactive_split_mib * MIB);
    // One list for every process's window, kept from one to the next:
    // gathered afresh for each probed process every tick, a window of
    // sixty buckets (the default minute) grew its list several times over
    // and gave it back.
    let mut scores: Vec<(f64, u32)> = Vec::new();
    for (pk, p, gpu) in process_gpus(i.snap) {
        let Some(series) = i.store.process(&pk) else { continue };
        let now = device(p, gpu);
        let k = key(AlertKind::Fragmentation, gpu, Some(p.pid));
        // No figure (cudaMallocAsync, expandable segments, no probe): the
        // rule has nothing to say, and an alert raised before clears. Far
        // below the line, it clears too, without reading the window.
        let (Some(reserved), Some(split)) = (now.and_then(|d| d.reserved), now.and_then(|d| d.inactive_split)) else {
            v.insert(k, Verdict::Clear);
            continue;
        };
        if now.and_then(|d| d.fragmentation).is_none() || reserved < min_reserved / 2 || split < min_split / 2 {
            v.insert(k, Verdict::Clear);
            continue;
        }
        scores.clear();
        scores.extend(series.recent_field(window_ms, FRAGMENTATION).filter_map(|f| Some((f.mean()?, f.count()))));
        let samples: usize = scores.iter().map(|(_, n)| *n as usize).sum();
        let verdict = if reserved < min_reserved || split < min_split || samples < c.min_samples {
            // Near the eligibility line, or too few samples yet: no change
            // either way, so a process hovering at 2 GiB does not flap.
            Verdict::Hold
        } else {
            let median = median(&mut scores);
            if median >= c.enter {
                Verdict::Raise(Raise {
                    severity: Severity::Warning,
                    value: Some(median),
                    threshold: Some(c.enter),
                    message: format!(
                        "PID {} on GPU {gpu}: {} of its reserved memory is trapped in partly used blocks \
                         ({} inactive split of {} reserved; median over {})",
                        p.pid,
                        pct(median),
                        bytes(split),
                        bytes(reserved),
                        humantime::format_duration(c.window)
                    ),
                    hint: format!(
                        "Set {}=expandable_segments:True (the fix PyTorch's own OOM message suggests) so \
                         segments grow instead of splitting; keeping tensor shapes stable across steps helps too.",
                        p.allocator.as_ref().map_or("PYTORCH_CUDA_ALLOC_CONF", |a| a.conf_var())
                    ),
                })
            } else if median < c.exit {
                Verdict::Clear
            } else {
                Verdict::Hold
            }
        };
        v.insert(k, verdict);
    }
}

/// The median of values each standing for `n` samples (a bucket's mean):
/// with one sample each, the plain median (the middle two averaged).
/// Values that compare equal are the same figure, so their order among
/// themselves cannot move the median: the sort need not be stable.
fn median(values: &mut [(f64, u32)]) -> f64 {
    values.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let n: u64 = values.iter().map(|(_, n)| u64::from(*n)).sum();
    let at = |rank: u64| {
        let mut seen = 0;
        values.iter().find(|(_, k)| {
            seen += u64::from(*k);
            seen > rank
        })
    };
    match (at(n.saturating_sub(1) / 2), at(n / 2)) {
        (Some(lo), Some(hi)) => (lo.0 + hi.0) / 2.0,
        _ => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn the_median_of_single_samples_is_the_plain_median() {
        assert_eq!(median(&mut [(3.0, 1), (1.0, 1), (2.0, 1)]), 2.0);
        assert_eq!(median(&mut [(4.0, 1), (1.0, 1), (2.0, 1), (3.0, 1)]), 2.5);
    }

    #[test]
    fn buckets_count_by_their_samples() {
        // 0.1 stands for 5 samples, 0.9 for 2: the median is 0.1.
        assert_eq!(median(&mut [(0.9, 2), (0.1, 5)]), 0.1);
        assert_eq!(median(&mut [(0.2, 1), (0.4, 1), (0.6, 2)]), 0.5);
        assert!(median(&mut []).is_nan());
    }
}
