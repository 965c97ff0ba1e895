//! Each GPU's health verdict (ok / warning / critical) and its reasons,
//! from what the snapshot already holds: the GPU's state, remapped rows,
//! ECC counters, pages pending retirement, the recovery action the driver
//! recommends, why the clocks are held down, the driver's recent Xids,
//! and error counters that grew. Judged once per tick, before the alert
//! rules, which read it; kept per GPU by UUID between ticks only to see a
//! counter grow.
//!
//! The table, one row per reading, and why:
//! - lost (NVML_ERROR_GPU_IS_LOST): critical, the node needs a reboot.
//! - a failed row remapping: critical; nvml.h's `nvmlDeviceGetRemappedRows`
//!   "failureOccurred": the board has no spare rows left: replace it.
//! - a remapping pending: warning; it takes effect at the next GPU reset.
//! - uncorrectable (double-bit) ECC errors since the driver loaded:
//!   critical; NVIDIA's Xid catalogue has Xid 48 reset the GPU.
//! - pages pending retirement: warning; retired at the next reboot.
//! - a recovery action the driver recommends (R570+): critical (reset,
//!   reboot, drain); one this build does not know: warning.
//! - a critical Xid within `alerts.xid.window`: critical (`xid.rs`).
//! - hardware slowdown, HW thermal slowdown, power brake (clock event
//!   reasons): warning; software power and thermal caps are normal.
//! - NVLink CRC / replay / recovery errors, the PCIe replay counter,
//!   growing within `alerts.health.hold`: warning.

use std::collections::HashMap;

use super::config::AlertsConfig;
use crate::model::{
    DriverEventKind, Gpu, GpuState, Health, HealthCode, HealthReason, NvLinkErrors, RecoveryAction, Severity, Snapshot,
};

/// What is kept of each GPU between ticks.
#[derive(Debug, Default)]
pub struct HealthState {
    gpus: HashMap<String, Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    nvlink: Growth,
    pcie_replays: Growth,
}

/// A cumulative counter: its last value, and when it last grew.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Growth {
    last: Option<u64>,
    grew_at_ms: Option<u64>,
    /// By how much it grew then.
    by: u64,
}

impl Growth {
    /// Takes `now` (where read); a counter that went back (a reset, a
    /// driver reload) starts again from there.
    fn see(&mut self, now: Option<u64>, at_ms: u64) {
        let Some(now) = now else { return };
        if let Some(last) = self.last
            && now > last
        {
            self.grew_at_ms = Some(at_ms);
            self.by = now - last;
        }
        self.last = Some(now);
    }

    /// Whether it grew within `hold_ms` of `at_ms`.
    fn recent(&self, at_ms: u64, hold_ms: u64) -> bool {
        self.grew_at_ms.is_some_and(|t| at_ms.saturating_sub(t) < hold_ms)
    }
}

impl HealthState {
    /// Fills in every GPU's `health`.
    pub fn judge(&mut self, snap: &mut Snapshot, config: &AlertsConfig) {
        let now_ms = snap.time.time_unix_ms;
        let status = snap.sources.driver_events.as_ref();
        let mut seen = Vec::with_capacity(snap.gpus.len());
        for gpu in &mut snap.gpus {
            let key = gpu.uuid.clone().unwrap_or_else(|| gpu.index.to_string());
            let listening = status.is_some_and(|s| s.listening && !s.not_on.contains(&key));
            let kept = self.gpus.entry(key.clone()).or_default();
            kept.nvlink.see(nvlink_total(gpu.nvlink_errors.as_ref()), now_ms);
            // The PCIe replay counter (`nvmlDeviceGetPcieReplayCounter`):
            // link-level retries of transfers that arrived wrong; growing,
            // the link is failing. Read where the output asks for the PCIe
            // link (JSON, recordings, the exporter); elsewhere the check is
            // listed as not made (`unchecked`).
            kept.pcie_replays.see(gpu.pcie_link.replay_counter, now_ms);
            gpu.health = Some(verdict(gpu, kept, now_ms, listening, config));
            seen.push(key);
        }
        self.gpus.retain(|k, _| seen.contains(k));
    }
}

/// NVLink's error counters added up: any of them growing is a warning.
fn nvlink_total(errors: Option<&NvLinkErrors>) -> Option<u64> {
    let e = errors?;
    let parts = [e.crc_flit, e.crc_data, e.replay, e.recovery];
    parts.iter().any(Option::is_some).then(|| parts.iter().flatten().fold(0u64, |sum, v| sum.saturating_add(*v)))
}

fn verdict(gpu: &Gpu, kept: &Kept, now_ms: u64, listening: bool, config: &AlertsConfig) -> Health {
    let mut reasons = Vec::new();
    let mut unchecked = Vec::new();
    let mut reason = |code, severity, message: String| reasons.push(HealthReason { code, severity, message });
    if gpu.state == GpuState::Lost {
        reason(
            HealthCode::GpuLost,
            Severity::Critical,
            "fell off the bus (NVML reports it lost): drain the node and reboot it; its jobs have failed".into(),
        );
    }
    let rows = &gpu.remapped_rows;
    match rows.failure {
        Some(true) => reason(
            HealthCode::RowRemapFailed,
            Severity::Critical,
            "a row remapping failed: the memory has no spare rows left; replace the board".into(),
        ),
        Some(false) => {}
        None => unchecked.push(HealthCode::RowRemapFailed),
    }
    match rows.pending {
        Some(true) => reason(
            HealthCode::RowRemapPending,
            Severity::Warning,
            "a row remapping waits for the next GPU reset: reset it once its jobs are done".into(),
        ),
        Some(false) => {}
        None => unchecked.push(HealthCode::RowRemapPending),
    }
    match gpu.ecc.uncorrected_volatile {
        Some(n) if n > 0 => reason(
            HealthCode::EccUncorrected,
            Severity::Critical,
            format!("{n} uncorrectable ECC error(s) since the driver loaded: drain the GPU's jobs and reset it"),
        ),
        Some(_) => {}
        None => unchecked.push(HealthCode::EccUncorrected),
    }
    match gpu.ecc.retired_pages_pending {
        Some(true) => reason(
            HealthCode::RetiredPagesPending,
            Severity::Warning,
            "memory pages wait to be retired at the next reboot: reboot once its jobs are done".into(),
        ),
        Some(false) => {}
        None => unchecked.push(HealthCode::RetiredPagesPending),
    }
    match gpu.recovery_action {
        Some(RecoveryAction::None) => {}
        Some(action) => reason(
            HealthCode::RecoveryAction,
            if action == RecoveryAction::Unknown { Severity::Warning } else { Severity::Critical },
            format!("the driver recommends a recovery action: {}", action.describe()),
        ),
        None => unchecked.push(HealthCode::RecoveryAction),
    }
    let window_ms = super::rules::window_ms(config.xid.window);
    let recent_critical = gpu
        .driver_events
        .iter()
        .rev()
        .filter(|e| e.kind == DriverEventKind::Xid && e.severity == Severity::Critical)
        .find(|e| now_ms.saturating_sub(e.time.time_unix_ms) < window_ms);
    if let Some(e) = recent_critical {
        let what = e.meaning.as_deref().unwrap_or("not in NVIDIA's Xid catalogue as gpuscope has it");
        let todo = e.action.map_or("look it up in NVIDIA's Xid catalogue", |a| a.describe());
        let xid = e.xid.map_or_else(|| "?".into(), |x| x.to_string());
        reason(HealthCode::Xid, Severity::Critical, format!("Xid {xid} at {}: {what}; {todo}", e.time.time));
    }
    if !listening {
        unchecked.push(HealthCode::Xid);
    }
    match &gpu.throttle_reasons {
        Some(reasons) => {
            let has = |name: &str| reasons.iter().any(|r| r == name);
            // nvml.h: HW slowdown is set with either of the two below; said
            // once, by the more precise of them.
            if has("hw_thermal_slowdown") {
                reason(
                    HealthCode::HwThermalSlowdown,
                    Severity::Warning,
                    "the hardware slows the clocks down: too hot; check the cooling and airflow".into(),
                );
            }
            if has("hw_power_brake_slowdown") {
                reason(
                    HealthCode::HwPowerBrake,
                    Severity::Warning,
                    "the power brake slows the clocks down (the system's power supply asserted it); check the \
                     power supply"
                        .into(),
                );
            }
            if has("hw_slowdown") && !has("hw_thermal_slowdown") && !has("hw_power_brake_slowdown") {
                reason(
                    HealthCode::HwSlowdown,
                    Severity::Warning,
                    "the hardware slows the clocks down (temperature, power brake or power draw too high)".into(),
                );
            }
        }
        None => unchecked.push(HealthCode::HwSlowdown),
    }
    let hold_ms = super::rules::window_ms(config.health.hold);
    if kept.nvlink.recent(now_ms, hold_ms) {
        reason(
            HealthCode::NvlinkErrors,
            Severity::Warning,
            format!(
                "NVLink errors are growing (+{} CRC, replay or recovery errors): check the links \
                 (nvidia-smi nvlink -e)",
                kept.nvlink.by
            ),
        );
    } else if gpu.nvlink.is_some() && gpu.nvlink_errors.is_none() {
        unchecked.push(HealthCode::NvlinkErrors);
    }
    if kept.pcie_replays.recent(now_ms, hold_ms) {
        reason(
            HealthCode::PcieReplays,
            Severity::Warning,
            format!("the PCIe link is replaying (+{}): check the slot, riser and cabling", kept.pcie_replays.by),
        );
    } else if kept.pcie_replays.last.is_none() {
        unchecked.push(HealthCode::PcieReplays);
    }
    if !listening {
        unchecked.push(HealthCode::DriverEvents);
    }
    if gpu.state == GpuState::Lost {
        // Nothing else can be read from a lost GPU: the list says nothing new.
        unchecked.clear();
    }
    unchecked.sort_unstable();
    unchecked.dedup();
    Health::from_reasons(reasons, unchecked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DriverEvent, HealthVerdict, Timestamp, XidAction};

    const NOW_MS: u64 = 1_700_000_000_000;

    /// A GPU whose every health reading says all is well.
    fn healthy() -> Gpu {
        let mut g = Gpu::blank(0, GpuState::Ok);
        g.remapped_rows.failure = Some(false);
        g.remapped_rows.pending = Some(false);
        g.ecc.uncorrected_volatile = Some(0);
        g.ecc.retired_pages_pending = Some(false);
        g.recovery_action = Some(RecoveryAction::None);
        g.throttle_reasons = Some(vec!["sw_power_cap".into()]);
        g
    }

    fn judge(gpu: &Gpu) -> Health {
        verdict(gpu, &Kept::default(), NOW_MS, true, &AlertsConfig::default())
    }

    fn codes(h: &Health) -> Vec<(HealthCode, Severity)> {
        h.reasons.iter().map(|r| (r.code, r.severity)).collect()
    }

    fn xid(number: u32, action: XidAction, severity: Severity, ago_ms: u64) -> DriverEvent {
        DriverEvent {
            time: Timestamp::from_system(std::time::UNIX_EPOCH + std::time::Duration::from_millis(NOW_MS - ago_ms)),
            kind: DriverEventKind::Xid,
            xid: Some(number),
            mnemonic: None,
            meaning: Some("something".into()),
            action: Some(action),
            severity,
            gpu_instance_id: None,
            compute_instance_id: None,
        }
    }

    #[test]
    fn a_healthy_gpu_is_ok_and_says_what_it_could_not_check() {
        let h = judge(&healthy());
        assert_eq!((h.verdict, h.reasons.len()), (HealthVerdict::Ok, 0));
        assert_eq!(h.unchecked, [HealthCode::PcieReplays], "where the replay counter is not read");
        let unknown = judge(&Gpu::blank(0, GpuState::Ok));
        assert_eq!(unknown.verdict, HealthVerdict::Ok, "nothing known is nothing wrong...");
        assert!(unknown.unchecked.contains(&HealthCode::RowRemapFailed), "...and says so: {:?}", unknown.unchecked);
    }

    /// The replay counter is judged by its growth between ticks: a count
    /// that stands (the link retried once, long ago) is not a fault.
    #[test]
    fn a_growing_pcie_replay_counter_is_a_warning() {
        let mut g = healthy();
        let mut kept = Kept::default();
        let mut tick = |count: u64, at_ms: u64| {
            g.pcie_link.replay_counter = Some(count);
            kept.pcie_replays.see(g.pcie_link.replay_counter, at_ms);
            verdict(&g, &kept, at_ms, true, &AlertsConfig::default())
        };
        let first = tick(40, NOW_MS);
        assert_eq!((first.verdict, first.unchecked.len()), (HealthVerdict::Ok, 0), "read, and standing");
        assert_eq!(tick(40, NOW_MS + 1_000).verdict, HealthVerdict::Ok);
        let grew = tick(47, NOW_MS + 2_000);
        assert_eq!(codes(&grew), [(HealthCode::PcieReplays, Severity::Warning)]);
        assert!(grew.reasons[0].message.contains("+7"), "{}", grew.reasons[0].message);
    }

    #[test]
    fn the_verdict_table() {
        type Case = (&'static str, fn(&mut Gpu), HealthCode, Severity);
        let cases: [Case; 9] = [
            ("lost", |g| g.state = GpuState::Lost, HealthCode::GpuLost, Severity::Critical),
            ("remap failed", |g| g.remapped_rows.failure = Some(true), HealthCode::RowRemapFailed, Severity::Critical),
            ("remap pending", |g| g.remapped_rows.pending = Some(true), HealthCode::RowRemapPending, Severity::Warning),
            ("DBE", |g| g.ecc.uncorrected_volatile = Some(2), HealthCode::EccUncorrected, Severity::Critical),
            ("pages", |g| g.ecc.retired_pages_pending = Some(true), HealthCode::RetiredPagesPending, Severity::Warning),
            (
                "recovery",
                |g| g.recovery_action = Some(RecoveryAction::DrainAndReset),
                HealthCode::RecoveryAction,
                Severity::Critical,
            ),
            (
                "thermal",
                |g| g.throttle_reasons = Some(vec!["hw_slowdown".into(), "hw_thermal_slowdown".into()]),
                HealthCode::HwThermalSlowdown,
                Severity::Warning,
            ),
            (
                "brake",
                |g| g.throttle_reasons = Some(vec!["hw_slowdown".into(), "hw_power_brake_slowdown".into()]),
                HealthCode::HwPowerBrake,
                Severity::Warning,
            ),
            (
                "slowdown",
                |g| g.throttle_reasons = Some(vec!["hw_slowdown".into()]),
                HealthCode::HwSlowdown,
                Severity::Warning,
            ),
        ];
        for (what, change, code, severity) in cases {
            let mut g = healthy();
            change(&mut g);
            let h = judge(&g);
            assert_eq!(codes(&h), [(code, severity)], "{what}");
            assert_eq!(h.verdict, severity.into(), "{what}");
            assert!(!h.reasons[0].message.is_empty(), "{what}");
        }
    }

    #[test]
    fn a_recent_critical_xid_is_critical_and_an_application_fault_is_not() {
        let mut g = healthy();
        g.driver_events.push(xid(13, XidAction::RestartApp, Severity::Warning, 1000));
        assert_eq!(judge(&g).verdict, HealthVerdict::Ok, "the application's fault, not the board's");
        g.driver_events.push(xid(79, XidAction::RebootNode, Severity::Critical, 1000));
        let h = judge(&g);
        assert_eq!(codes(&h), [(HealthCode::Xid, Severity::Critical)]);
        assert!(h.reasons[0].message.starts_with("Xid 79 at "), "{}", h.reasons[0].message);
        let mut old = healthy();
        old.driver_events.push(xid(79, XidAction::RebootNode, Severity::Critical, 2 * 3_600_000));
        assert_eq!(judge(&old).verdict, HealthVerdict::Ok, "older than alerts.xid.window");
    }

    #[test]
    fn a_growing_error_counter_warns_for_the_hold_then_clears() {
        let mut state = Kept::default();
        let hold = 300_000;
        state.nvlink.see(Some(5), NOW_MS);
        assert!(!state.nvlink.recent(NOW_MS, hold), "the first reading is the baseline");
        state.nvlink.see(Some(9), NOW_MS + 10_000);
        assert!(state.nvlink.recent(NOW_MS + 10_000, hold));
        let mut g = healthy();
        g.nvlink_errors = Some(NvLinkErrors { replay: Some(9), ..NvLinkErrors::default() });
        let h = verdict(&g, &state, NOW_MS + 10_000, true, &AlertsConfig::default());
        assert_eq!(codes(&h), [(HealthCode::NvlinkErrors, Severity::Warning)]);
        assert!(h.reasons[0].message.contains("+4"), "{}", h.reasons[0].message);
        state.nvlink.see(Some(9), NOW_MS + 20_000);
        assert!(!state.nvlink.recent(NOW_MS + 10_000 + hold, hold), "no growth since: cleared after the hold");
        state.nvlink.see(Some(1), NOW_MS + 30_000);
        assert_eq!(state.nvlink.last, Some(1), "a counter that went back starts again");
        assert_eq!(
            nvlink_total(Some(&NvLinkErrors { crc_flit: Some(2), replay: Some(3), ..Default::default() })),
            Some(5)
        );
        assert_eq!(nvlink_total(Some(&NvLinkErrors::default())), None);
    }

    #[test]
    fn without_events_the_xid_check_is_not_made() {
        let h = verdict(&healthy(), &Kept::default(), NOW_MS, false, &AlertsConfig::default());
        assert!(h.unchecked.contains(&HealthCode::Xid) && h.unchecked.contains(&HealthCode::DriverEvents));
    }
}
