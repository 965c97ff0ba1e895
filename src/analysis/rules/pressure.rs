//! Device memory nearly full. The minimum duration (default 30 s) is the
//! engine's: a brief peak during a step is normal, a full device is not.

use super::{Inputs, Verdicts, key};
use crate::analysis::engine::{Raise, Verdict};
use crate::model::{AlertKind, Severity};
use crate::util::units::bytes;

pub fn judge(i: &Inputs<'_>, v: &mut Verdicts) {
    let c = &i.config.memory_pressure;
    for gpu in &i.snap.gpus {
        let (Some(free), Some(total)) = (gpu.memory.free, gpu.memory.total) else { continue };
        if total == 0 {
            continue;
        }
        let free_pct = free as f64 * 100.0 / total as f64;
        let severity = if free_pct < c.critical_free_percent {
            Some((Severity::Critical, c.critical_free_percent))
        } else if free_pct < c.warn_free_percent {
            Some((Severity::Warning, c.warn_free_percent))
        } else {
            None
        };
        let verdict = match severity {
            Some((severity, threshold)) => Verdict::Raise(Raise {
                severity,
                value: Some(free_pct),
                threshold: Some(threshold),
                message: format!("GPU {}: only {} free ({free_pct:.1}% of {})", gpu.index, bytes(free), bytes(total)),
                hint: "The next larger batch or longer sequence will not fit: reduce the batch size, use \
                       gradient checkpointing or mixed precision (bf16), and check for other processes \
                       on this GPU."
                    .into(),
            }),
            None if free_pct >= c.clear_free_percent => Verdict::Clear,
            None => Verdict::Hold,
        };
        v.insert(key(AlertKind::MemoryPressure, gpu.index, None), verdict);
    }
}
