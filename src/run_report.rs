//! `gpuscope run`'s end-of-job report: what the job used, gathered from
//! snapshots taken while it ran (`observe`) and summed up when it ended
//! (`finish`). Printed on stderr; `--report FILE` writes the same as JSON
//! (`assets/run-report.schema.json`).
//!
//! - GPU-hours: the GPUs the job was seen on, times its length, as Slurm
//!   accounts an allocation (`AllocTRES` GPUs × `Elapsed`).
//! - Energy: each GPU's counter (`nvmlDeviceGetTotalEnergyConsumption`)
//!   between samples, from the first sample to the last, taken as the job
//!   ends. On a GPU the job had to itself, that difference is the job's.
//!   On one other processes used too, each span between samples is
//!   weighed by the job's share of the GPU at its end, from NVML's
//!   per-process SM samples (`Gpu::process_utilization`), else from the
//!   device memory each process holds, else split evenly between the
//!   processes: an estimate, and the report says so.
//! - Utilisation and SM activity: the means of each GPU's samples while
//!   the job was on it; the allocator's peaks and OOMs from the probes of
//!   the job's processes; the alerts that named the job's processes or
//!   GPUs; the data wait, the largest of the job's DataLoaders' shares,
//!   averaged over the samples that had one.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::hashing::IntSet;
use crate::model::{AlertKind, Gpu, Severity, Snapshot};
use crate::sources::procstat;

/// The processes of the job's tree among `snap`'s: the job itself and
/// those whose ancestry, read from `/proc`, leads to it.
pub fn members(snap: &Snapshot, root: u32, proc_root: &Path) -> IntSet<u32> {
    let mut ours = IntSet::default();
    for p in &snap.processes {
        if descends(p.pid, root, proc_root) {
            ours.insert(p.pid);
        }
    }
    ours
}

/// Whether `pid` is `root` or below it; a tree deeper than 64 levels, or
/// one the reader cannot see, is not the job's.
fn descends(mut pid: u32, root: u32, proc_root: &Path) -> bool {
    for _ in 0..64 {
        if pid == root {
            return true;
        }
        match procstat::read(proc_root, pid) {
            Some(stat) if stat.parent > 1 && stat.parent != pid => pid = stat.parent,
            _ => return false,
        }
    }
    false
}

#[derive(Debug, Default)]
struct GpuSeen {
    uuid: Option<String>,
    name: Option<String>,
    /// Samples with one of the job's processes on the GPU.
    used: u32,
    shared: bool,
    /// How the shares of shared samples were judged.
    method: Option<ShareMethod>,
    last_energy_mj: Option<u64>,
    /// Each span between samples: its energy and the job's share at its
    /// end, `None` with no process on the GPU.
    spans: Vec<(u64, Option<f64>)>,
    energy_unknown: bool,
    util: Mean,
    sm: Mean,
    allocated_peak: Option<u64>,
    reserved_peak: Option<u64>,
    ooms: Option<u64>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Mean {
    sum: f64,
    n: u32,
}

impl Mean {
    fn add(&mut self, v: Option<f64>) {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            self.sum += v;
            self.n += 1;
        }
    }

    fn get(self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / f64::from(self.n))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShareMethod {
    /// NVML's per-process SM samples.
    SmSamples,
    /// The device memory each process holds.
    Memory,
    /// An even split between the processes on the GPU.
    ProcessCount,
}

/// The job's share of `g` in this sample, and how it was judged; `None`
/// with no process on it.
fn share(g: &Gpu, snap: &Snapshot, ours: &IntSet<u32>) -> Option<(f64, Option<ShareMethod>)> {
    let on: Vec<(u32, Option<u64>)> = (snap.processes.iter())
        .filter_map(|p| p.gpus.iter().find(|pg| pg.index == g.index).map(|pg| (p.pid, pg.used_memory)))
        .collect();
    let mine = on.iter().filter(|(pid, _)| ours.contains(pid)).count();
    match (mine, on.len()) {
        (_, 0) => None,
        (0, _) => Some((0.0, None)),
        (m, n) if m == n => Some((1.0, None)),
        (m, n) => {
            let split = |f: &dyn Fn(u32) -> Option<f64>| {
                let (mut job, mut all) = (0.0, 0.0);
                for (pid, _) in &on {
                    let v = f(*pid).unwrap_or(0.0);
                    all += v;
                    if ours.contains(pid) {
                        job += v;
                    }
                }
                (all > 0.0).then(|| job / all)
            };
            let samples = g.process_utilization.as_ref();
            let by_sm = samples.and_then(|s| split(&|pid| s.iter().find(|u| u.pid == pid).map(|u| f64::from(u.sm))));
            let by_memory = || split(&|pid| on.iter().find(|(p, _)| *p == pid).and_then(|(_, m)| m.map(|m| m as f64)));
            Some(match (by_sm, by_memory()) {
                (Some(s), _) => (s, Some(ShareMethod::SmSamples)),
                (None, Some(s)) => (s, Some(ShareMethod::Memory)),
                (None, None) => (m as f64 / n as f64, Some(ShareMethod::ProcessCount)),
            })
        }
    }
}

/// What the samples said so far.
#[derive(Debug, Default)]
pub struct Gathered {
    gpus: BTreeMap<u32, GpuSeen>,
    samples: u32,
    alerts: BTreeMap<(AlertKind, Option<u32>, Option<u32>), ReportAlert>,
    data_wait: Mean,
    /// Why there are no GPU readings (no driver), if there are none.
    unavailable: Option<String>,
}

impl Gathered {
    pub fn unavailable(&mut self, why: String) {
        self.unavailable = Some(why);
    }

    /// Takes in one snapshot; `ours` are the job's processes in it.
    pub fn observe(&mut self, snap: &Snapshot, ours: &IntSet<u32>) {
        self.samples += 1;
        for g in &snap.gpus {
            let seen = self.gpus.entry(g.index).or_default();
            seen.uuid.clone_from(&g.uuid);
            seen.name.clone_from(&g.name);
            let share = share(g, snap, ours);
            match (seen.last_energy_mj, g.energy_mj) {
                (Some(before), Some(now)) if now >= before => seen.spans.push((now - before, share.map(|s| s.0))),
                // A counter that went back: the driver reloaded.
                (Some(_), _) => seen.energy_unknown = true,
                _ => {}
            }
            if g.energy_mj.is_none() {
                seen.energy_unknown = true;
            }
            seen.last_energy_mj = g.energy_mj;
            if share.is_some_and(|(s, _)| s > 0.0) {
                seen.used += 1;
                seen.util.add(g.utilization.gpu.map(f64::from));
                seen.sm.add(g.activity.as_ref().and_then(|a| a.sm_active));
            }
            if let Some((s, Some(method))) = share
                && s > 0.0
            {
                seen.shared = true;
                seen.method = seen.method.max(Some(method));
            }
        }
        let mut wait = None::<f64>;
        for p in snap.processes.iter().filter(|p| ours.contains(&p.pid)) {
            for d in p.allocator.iter().flat_map(|a| &a.devices) {
                let Some(seen) = d.gpu.and_then(|i| self.gpus.get_mut(&i)) else { continue };
                seen.allocated_peak = seen.allocated_peak.max(d.allocated_peak.or(d.allocated));
                seen.reserved_peak = seen.reserved_peak.max(d.reserved_peak.or(d.reserved));
                seen.ooms = seen.ooms.max(d.ooms);
            }
            if let Some(w) = p.input.as_ref().and_then(|i| i.wait_share()) {
                wait = Some(wait.map_or(w, |x| x.max(w)));
            }
        }
        self.data_wait.add(wait);
        let job_gpus: Vec<u32> = self.gpus.iter().filter(|(_, s)| s.used > 0).map(|(i, _)| *i).collect();
        for a in &snap.alerts {
            let ours = a.pid.is_some_and(|p| ours.contains(&p))
                || (a.pid.is_none() && a.gpu.is_some_and(|g| job_gpus.contains(&g)));
            if ours {
                self.alerts.entry((a.kind, a.gpu, a.pid)).or_insert_with(|| ReportAlert {
                    kind: a.kind,
                    severity: a.severity,
                    gpu: a.gpu,
                    pid: a.pid,
                    message: a.message.clone(),
                });
            }
        }
    }

    /// The report of a job that ran `duration_s` and ended with `exit`.
    pub fn finish(&self, command: Vec<String>, exit: ReportExit, duration_s: f64, interval_s: f64) -> RunReport {
        let gpus: Vec<ReportGpu> = (self.gpus.iter())
            .filter(|(_, s)| s.used > 0)
            .map(|(&index, s)| {
                let energy_j = (!s.energy_unknown && !s.spans.is_empty())
                    .then(|| s.spans.iter().map(|(mj, share)| *mj as f64 * share.unwrap_or(1.0)).sum::<f64>() / 1000.0);
                ReportGpu {
                    index,
                    uuid: s.uuid.clone(),
                    name: s.name.clone(),
                    energy_j,
                    energy_kwh: energy_j.map(joules_to_kwh),
                    shared: s.shared,
                    share_method: s.method,
                    mean_utilization_percent: s.util.get(),
                    mean_sm_active_percent: s.sm.get(),
                    allocated_peak_bytes: s.allocated_peak,
                    reserved_peak_bytes: s.reserved_peak,
                    ooms: s.ooms,
                }
            })
            .collect();
        let energy_j = (!gpus.is_empty() && gpus.iter().all(|g| g.energy_j.is_some()))
            .then(|| gpus.iter().filter_map(|g| g.energy_j).sum::<f64>());
        let ooms = gpus.iter().filter_map(|g| g.ooms).reduce(|a, b| a + b);
        RunReport {
            command,
            exit,
            duration_s,
            interval_s,
            samples: self.samples,
            // Without a reading, how many GPUs the job held is unknown,
            // not none.
            gpu_hours: (self.unavailable.is_none() && self.samples > 0)
                .then(|| gpus.len() as f64 * duration_s / 3600.0),
            energy_kwh: energy_j.map(joules_to_kwh),
            energy_estimated: gpus.iter().any(|g| g.shared),
            ooms,
            data_wait_share: self.data_wait.get(),
            alerts: self.alerts.values().cloned().collect(),
            unavailable: self.unavailable.clone(),
            gpus,
        }
    }
}

fn joules_to_kwh(j: f64) -> f64 {
    j / 3.6e6
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    pub command: Vec<String>,
    pub exit: ReportExit,
    pub duration_s: f64,
    /// How often the job was sampled.
    pub interval_s: f64,
    pub samples: u32,
    /// `None` where no reading was taken (no driver, or a job too short
    /// for one).
    pub gpu_hours: Option<f64>,
    /// Over the job's GPUs; `None` where a GPU's energy is unknown.
    pub energy_kwh: Option<f64>,
    /// Some GPU was shared with other processes: its energy is the job's
    /// estimated share (`gpus[].share_method`).
    pub energy_estimated: bool,
    pub ooms: Option<u64>,
    pub data_wait_share: Option<f64>,
    pub alerts: Vec<ReportAlert>,
    pub unavailable: Option<String>,
    pub gpus: Vec<ReportGpu>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ReportExit {
    /// What gpuscope exits with: the job's status, or 128 + the signal.
    pub status: u8,
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReportGpu {
    pub index: u32,
    pub uuid: Option<String>,
    pub name: Option<String>,
    pub energy_j: Option<f64>,
    pub energy_kwh: Option<f64>,
    pub shared: bool,
    pub share_method: Option<ShareMethod>,
    pub mean_utilization_percent: Option<f64>,
    pub mean_sm_active_percent: Option<f64>,
    pub allocated_peak_bytes: Option<u64>,
    pub reserved_peak_bytes: Option<u64>,
    pub ooms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReportAlert {
    pub kind: AlertKind,
    pub severity: Severity,
    pub gpu: Option<u32>,
    pub pid: Option<u32>,
    pub message: String,
}

impl RunReport {
    /// The report as stderr shows it.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let ended = match (self.exit.code, self.exit.signal) {
            (_, Some(sig)) => format!("killed by signal {sig} (exit {})", self.exit.status),
            _ => format!("exit {}", self.exit.status),
        };
        let _ = writeln!(out, "gpuscope: job ended, {ended}, after {}", duration(self.duration_s));
        if let Some(why) = &self.unavailable {
            let _ = writeln!(out, "  no GPU readings: {why}");
        }
        if self.gpus.is_empty() && self.unavailable.is_none() {
            let _ =
                writeln!(out, "  the job was not seen on a GPU ({} samples, every {}s)", self.samples, self.interval_s);
        }
        if !self.gpus.is_empty() {
            let list: Vec<String> = self.gpus.iter().map(|g| g.index.to_string()).collect();
            let _ = writeln!(
                out,
                "  GPUs {}  {} GPU-hours  energy {}{}",
                list.join(","),
                self.gpu_hours.map_or_else(|| "n/a".to_string(), |h| format!("{h:.3}")),
                kwh(self.energy_kwh),
                if self.energy_estimated { " (estimated, see below)" } else { "" },
            );
        }
        for g in &self.gpus {
            let pct = |v: Option<f64>| v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.0}%"));
            let _ = write!(
                out,
                "  GPU {}  util {}  SM {}  energy {}",
                g.index,
                pct(g.mean_utilization_percent),
                pct(g.mean_sm_active_percent),
                kwh(g.energy_kwh)
            );
            if g.allocated_peak_bytes.is_some() || g.reserved_peak_bytes.is_some() {
                let b = |v: Option<u64>| v.map_or_else(|| "n/a".to_string(), crate::util::units::bytes);
                let _ =
                    write!(out, "  peak allocated {} reserved {}", b(g.allocated_peak_bytes), b(g.reserved_peak_bytes));
            }
            out.push('\n');
            if g.shared {
                let how = match g.share_method {
                    Some(ShareMethod::SmSamples) => "its share of NVML's per-process SM samples",
                    Some(ShareMethod::Memory) => "its share of the device memory in use",
                    _ => "an even split between the processes on it",
                };
                let _ = writeln!(
                    out,
                    "    shared with other processes: the job's energy is an estimate, the GPU's energy between \
                     samples weighed by {how}"
                );
            }
        }
        let ooms = self.ooms.map_or_else(|| "n/a".to_string(), |n| n.to_string());
        let wait = self.data_wait_share.map_or_else(|| "n/a".to_string(), |w| format!("{:.0}%", w * 100.0));
        let _ = writeln!(out, "  OOMs {ooms}  data wait {wait}  alerts {}", self.alerts.len());
        for a in &self.alerts {
            let _ = writeln!(out, "    {:?} {}", a.severity, a.message);
        }
        out
    }
}

/// kWh, with the joules beside a figure too small to read in kWh.
fn kwh(v: Option<f64>) -> String {
    match v {
        None => "n/a".to_string(),
        Some(k) if k < 0.1 => format!("{k:.4} kWh ({:.0} J)", k * 3.6e6),
        Some(k) => format!("{k:.3} kWh"),
    }
}

fn duration(s: f64) -> String {
    let whole = s.max(0.0) as u64;
    match whole {
        0..60 => format!("{s:.1}s"),
        60..3600 => format!("{}m {:02}s", whole / 60, whole % 60),
        _ => format!("{}h {:02}m {:02}s", whole / 3600, whole / 60 % 60, whole % 60),
    }
}

#[cfg(test)]
mod tests;
