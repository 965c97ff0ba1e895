//! A GPU's health verdict (`analysis/health.rs`) is warning or critical:
//! the alert says every reason and what to do. A lost GPU and an Xid have
//! alerts of their own (`gpu_lost`, `xid`), so they do not raise this one
//! too.

use super::{Inputs, Verdicts, key};
use crate::analysis::engine::{Raise, Verdict};
use crate::model::{AlertKind, HealthCode, Severity};

pub fn judge(i: &Inputs<'_>, v: &mut Verdicts) {
    for gpu in &i.snap.gpus {
        let reasons: Vec<_> = (gpu.health.iter().flat_map(|h| &h.reasons))
            .filter(|r| !matches!(r.code, HealthCode::GpuLost | HealthCode::Xid) && r.severity > Severity::Info)
            .collect();
        // Sorted most severe first (`Health::from_reasons`).
        let verdict = match reasons.first() {
            Some(worst) => Verdict::Raise(Raise {
                severity: worst.severity,
                value: None,
                threshold: None,
                message: format!(
                    "GPU {}: {}",
                    gpu.index,
                    reasons.iter().map(|r| r.message.as_str()).collect::<Vec<_>>().join("; ")
                ),
                hint: "Drain the GPU's jobs before acting on it (scontrol update nodename=... state=drain, or \
                       kubectl cordon); `gpuscope check --health` gives the node's verdict."
                    .into(),
            }),
            None => Verdict::Clear,
        };
        v.insert(key(AlertKind::Health, gpu.index, None), verdict);
    }
}
