//! Memory trapped in partly used segments: the median of inactive split /
//! reserved over a window, judged only on processes where it is big enough
//! to cause an OOM (thresholds in `analysis::config`).

use super::{Inputs, Verdicts, key, pct, process_gpus};
use crate::analysis::engine::{Raise, Verdict};
use crate::model::{AlertKind, Severity};
use crate::units::bytes;

const MIB: u64 = 1 << 20;

pub fn judge(i: &Inputs<'_>, v: &mut Verdicts) {
    let c = &i.config.fragmentation;
    let window_ms = u64::try_from(c.window.as_millis()).unwrap_or(u64::MAX);
    for (pk, p, gpu) in process_gpus(i.snap) {
        let Some(series) = i.procs.get(&pk) else { continue };
        let Some((_, now)) = series.last() else { continue };
        // No figure (cudaMallocAsync, expandable segments, no probe): the
        // rule has nothing to say, and an alert raised before clears.
        let (Some(reserved), Some(split)) = (now.reserved, now.inactive_split) else {
            v.insert(key(AlertKind::Fragmentation, gpu, Some(p.pid)), Verdict::Clear);
            continue;
        };
        if now.fragmentation.is_none() {
            v.insert(key(AlertKind::Fragmentation, gpu, Some(p.pid)), Verdict::Clear);
            continue;
        }
        let (min_reserved, min_split) = (c.min_reserved_mib * MIB, c.min_inactive_split_mib * MIB);
        let mut scores: Vec<f64> = series.recent(window_ms).filter_map(|(_, pt)| pt.fragmentation).collect();
        let verdict = if reserved < min_reserved / 2 || split < min_split / 2 {
            Verdict::Clear
        } else if reserved < min_reserved || split < min_split || scores.len() < c.min_samples {
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
        v.insert(key(AlertKind::Fragmentation, gpu, Some(p.pid)), verdict);
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 }
}
