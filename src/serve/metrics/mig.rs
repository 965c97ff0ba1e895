//! Per MIG device families, with dcgm-exporter's MIG label names so that
//! queries written for it carry over: `GPU_I_ID` (GPU instance id),
//! `GPU_I_PROFILE` ("1g.10gb"), `GPU_CI_ID` (compute instance id), beside
//! gpuscope's own `gpu` and `uuid` (the parent's) and `mig_uuid` (the MIG
//! device's, which dcgm-exporter has no label for). Upper case as
//! dcgm-exporter spells them: Prometheus allows it in label names.

use super::{activity, gauge, info};
use crate::model::{Gpu, MigDevice, Snapshot};
use crate::serve::encode::{Def, Encoder, Value};

pub static INFO: Def = info("gpuscope_mig_device", "A MIG device (GPU instance + compute instance) of a GPU.");
pub static MEMORY_TOTAL: Def =
    gauge("gpuscope_mig_memory_total_bytes", Some("bytes"), "Device memory of the MIG device.");
pub static MEMORY_USED: Def =
    gauge("gpuscope_mig_memory_used_bytes", Some("bytes"), "Device memory in use on the MIG device.");
pub static MEMORY_FREE: Def =
    gauge("gpuscope_mig_memory_free_bytes", Some("bytes"), "Device memory free on the MIG device.");

pub static ALL: &[&Def] = &[&INFO, &MEMORY_TOTAL, &MEMORY_USED, &MEMORY_FREE];

/// The labels a MIG device's series carry, the parent's `gpu` and `uuid`
/// first.
pub struct MigLabels {
    gpu: String,
    uuid: String,
    gi: String,
    profile: String,
    ci: String,
    mig_uuid: String,
}

impl MigLabels {
    pub fn of(gpu: &Gpu, m: &MigDevice) -> Self {
        let id = |v: Option<u32>| v.map(|v| v.to_string()).unwrap_or_default();
        Self {
            gpu: gpu.index.to_string(),
            uuid: gpu.uuid.clone().unwrap_or_default(),
            gi: id(m.gpu_instance_id),
            profile: m.profile.clone().unwrap_or_default(),
            ci: id(m.compute_instance_id),
            mig_uuid: m.uuid.clone().unwrap_or_default(),
        }
    }

    /// Those of MIG device `mig` of GPU `gpu` in the snapshot, if listed.
    pub fn find(snap: &Snapshot, gpu: u32, mig: Option<u32>) -> Option<Self> {
        let g = snap.gpus.iter().find(|g| g.index == gpu)?;
        let m = g.mig_devices.iter().find(|m| Some(m.index) == mig)?;
        Some(Self::of(g, m))
    }

    /// Without `gpu` and `uuid`: what a process series adds to its own.
    pub fn instance(&self) -> [(&'static str, &str); 4] {
        [
            ("GPU_I_ID", &self.gi),
            ("GPU_I_PROFILE", &self.profile),
            ("GPU_CI_ID", &self.ci),
            ("mig_uuid", &self.mig_uuid),
        ]
    }

    fn all(&self) -> [(&'static str, &str); 6] {
        let [a, b, c, d] = self.instance();
        [("gpu", &self.gpu), ("uuid", &self.uuid), a, b, c, d]
    }

    /// `all` and one label more, without building a list.
    fn and<'a>(&'a self, label: (&'static str, &'a str)) -> [(&'static str, &'a str); 7] {
        let [a, b, c, d, e, f] = self.all();
        [a, b, c, d, e, f, label]
    }
}

type Reading = fn(&MigDevice) -> Option<Value>;

static READINGS: [(&Def, Reading); 3] = [
    (&MEMORY_TOTAL, |m| m.memory.total.map(Value::from)),
    (&MEMORY_USED, |m| m.memory.used.map(Value::from)),
    (&MEMORY_FREE, |m| m.memory.free.map(Value::from)),
];

pub fn write(enc: &mut Encoder, snap: &Snapshot) {
    let migs: Vec<(MigLabels, &MigDevice)> =
        snap.gpus.iter().flat_map(|g| g.mig_devices.iter().map(move |m| (MigLabels::of(g, m), m))).collect();
    let mut f = enc.family(&INFO);
    for (labels, m) in &migs {
        let index = m.index.to_string();
        f.sample(&labels.and(("mig_device", &index)), Some(1u64));
    }
    for (def, read) in READINGS {
        let mut f = enc.family(def);
        for (labels, m) in &migs {
            f.sample(&labels.all(), read(m));
        }
    }
    for (pair, read) in &activity::READINGS {
        let mut f = enc.family(&pair[1]);
        for (labels, m) in &migs {
            f.sample(&labels.all(), m.activity.as_ref().and_then(read));
        }
    }
    let mut f = enc.family(&activity::UNAVAILABLE[1]);
    for (labels, m) in &migs {
        if let Some(why) = m.activity_unavailable {
            f.sample(&labels.and(("reason", why.word())), Some(1u64));
        }
    }
}
