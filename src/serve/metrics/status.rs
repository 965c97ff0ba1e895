//! Active alerts, and gpuscope's view of itself.

use super::{counter, gauge, info};
use crate::model::Snapshot;
use crate::serve::encode::{Def, Encoder};

pub static ALERT: Def =
    gauge("gpuscope_alert_active", None, "1 for each active alert (see /snapshot for its message and hint).");
pub static COLLECT_DURATION: Def = gauge(
    "gpuscope_collect_duration_seconds",
    Some("seconds"),
    "How long the latest collection took, driver calls included.",
);
pub static NVML_CALLS: Def = gauge(
    "gpuscope_collect_nvml_calls",
    None,
    "NVML calls the latest collection made (a count-then-fill list counted once); absent where unknown.",
);
pub static NVML_ERRORS: Def = counter(
    "gpuscope_nvml_errors",
    None,
    "Snapshots in which NVML failed, plus GPUs found in an error state, since the exporter started.",
);
pub static PROBE_SKIPPED: Def = counter(
    "gpuscope_probe_files_skipped",
    None,
    "Allocator probe files refused (malformed, too big, not ours), since the exporter started.",
);
pub static BUILD: Def = info("gpuscope_build", "The gpuscope version serving these metrics (always 1).");
pub static SIMULATED: Def = gauge(
    "gpuscope_simulated",
    None,
    "1 when the GPUs are gpuscope's simulated ones (--demo) and every figure here is made up, else 0.",
);
pub static AGE: Def = gauge(
    "gpuscope_snapshot_age_seconds",
    Some("seconds"),
    "Time since the snapshot these metrics come from was taken.",
);

pub static ALL: &[&Def] =
    &[&ALERT, &COLLECT_DURATION, &NVML_CALLS, &NVML_ERRORS, &PROBE_SKIPPED, &BUILD, &SIMULATED, &AGE];

pub fn write(enc: &mut Encoder, snap: &Snapshot, nvml_errors: u64) {
    let mut f = enc.family(&ALERT);
    for a in &snap.alerts {
        let (kind, severity) = (to_label(&a.kind), to_label(&a.severity));
        let gpu = a.gpu.map(|g| g.to_string()).unwrap_or_default();
        let pid = a.pid.map(|p| p.to_string()).unwrap_or_default();
        f.sample(&[("kind", &kind), ("severity", &severity), ("gpu", &gpu), ("pid", &pid)], Some(1u64));
    }
    enc.family(&COLLECT_DURATION).sample(&[], Some(snap.collection_ms / 1000.0));
    enc.family(&NVML_CALLS).sample(&[], snap.sources.nvml.calls);
    enc.family(&NVML_ERRORS).sample(&[], Some(nvml_errors));
    enc.family(&PROBE_SKIPPED).sample(&[], Some(snap.sources.probes.skipped));
    enc.family(&BUILD).sample(&[("version", env!("CARGO_PKG_VERSION"))], Some(1u64));
    enc.family(&SIMULATED).sample(&[], Some(u64::from(snap.simulated)));
}

/// The snake_case name the JSON uses, so labels and `/snapshot` agree.
pub(super) fn to_label(v: &impl serde::Serialize) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}
