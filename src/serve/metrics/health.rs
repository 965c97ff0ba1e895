//! Board health: the verdict and its reasons, the Xid errors heard, the
//! recovery action the driver recommends, NVLink's error counters, and
//! whether the driver's events are heard at all. Every label set is
//! bounded: `reason` by gpuscope's fixed list of checks, `xid` by the 16
//! Xids a GPU counts apart (the rest as `other`).

use super::{counter, gauge};
use crate::model::{RecoveryAction, Snapshot};
use crate::serve::encode::{Def, Encoder};

pub static HEALTH: Def = gauge(
    "gpuscope_gpu_health",
    None,
    "The GPU's health verdict: 0 ok, 1 warning, 2 critical (see gpuscope_gpu_health_reason).",
);
pub static HEALTH_REASON: Def = gauge(
    "gpuscope_gpu_health_reason",
    None,
    "1 for each reason the GPU's health verdict gives, by reason and severity.",
);
pub static XID_ERRORS: Def = counter(
    "gpuscope_gpu_xid_errors",
    None,
    "Xid errors the driver reported on the GPU since gpuscope began listening, by Xid (16 apart, the rest as \
     xid=\"other\").",
);
pub static RECOVERY_ACTION: Def = gauge(
    "gpuscope_gpu_recovery_action",
    None,
    "The recovery action the driver recommends (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, R570 and later): 0 none, \
     1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset, 5 recover IMEX domain.",
);
pub static NVLINK_ERRORS: Def = counter(
    "gpuscope_gpu_nvlink_errors",
    None,
    "NVLink errors summed over every lane, by type (crc_flit, crc_data, replay, recovery).",
);
pub static EVENTS_LISTENING: Def = gauge(
    "gpuscope_driver_events_listening",
    None,
    "1 when gpuscope hears the driver's events (Xid, ECC) on some GPU, 0 when it cannot (see /snapshot's \
     sources.driver_events for why).",
);

pub static ALL: &[&Def] = &[&HEALTH, &HEALTH_REASON, &XID_ERRORS, &RECOVERY_ACTION, &NVLINK_ERRORS, &EVENTS_LISTENING];

fn recovery_code(a: RecoveryAction) -> Option<u64> {
    match a {
        RecoveryAction::None => Some(0),
        RecoveryAction::GpuReset => Some(1),
        RecoveryAction::NodeReboot => Some(2),
        RecoveryAction::DrainP2p => Some(3),
        RecoveryAction::DrainAndReset => Some(4),
        RecoveryAction::RecoverImexDomain => Some(5),
        RecoveryAction::Unknown => None,
    }
}

pub fn write(enc: &mut Encoder, snap: &Snapshot) {
    let ids: Vec<(String, &str)> =
        snap.gpus.iter().map(|g| (g.index.to_string(), g.uuid.as_deref().unwrap_or(""))).collect();
    let gpus = || ids.iter().zip(&snap.gpus);
    let mut f = enc.family(&HEALTH);
    for ((index, uuid), g) in gpus() {
        f.sample(&[("gpu", index), ("uuid", uuid)], g.health.as_ref().map(|h| u64::from(h.verdict.level())));
    }
    let mut f = enc.family(&HEALTH_REASON);
    for ((index, uuid), g) in gpus() {
        for r in g.health.iter().flat_map(|h| &h.reasons) {
            let severity = super::status::to_label(&r.severity);
            f.sample(&[("gpu", index), ("uuid", uuid), ("reason", r.code.word()), ("severity", &severity)], Some(1u64));
        }
    }
    let mut f = enc.family(&XID_ERRORS);
    for ((index, uuid), g) in gpus() {
        for c in &g.xid_counts {
            let xid = c.xid.map_or_else(|| "other".to_string(), |x| x.to_string());
            f.sample(&[("gpu", index), ("uuid", uuid), ("xid", &xid)], Some(c.count));
        }
    }
    let mut f = enc.family(&RECOVERY_ACTION);
    for ((index, uuid), g) in gpus() {
        f.sample(&[("gpu", index), ("uuid", uuid)], g.recovery_action.and_then(recovery_code));
    }
    let mut f = enc.family(&NVLINK_ERRORS);
    for ((index, uuid), g) in gpus() {
        let Some(e) = &g.nvlink_errors else { continue };
        for (kind, n) in
            [("crc_flit", e.crc_flit), ("crc_data", e.crc_data), ("replay", e.replay), ("recovery", e.recovery)]
        {
            f.sample(&[("gpu", index), ("uuid", uuid), ("type", kind)], n);
        }
    }
    let listening = snap.sources.driver_events.as_ref().map(|s| u64::from(s.listening));
    enc.family(&EVENTS_LISTENING).sample(&[], listening);
}
