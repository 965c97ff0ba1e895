//! What the probe says of a process's input pipeline and environment:
//! how much of its time it waits for its DataLoaders, their rates and
//! settings (`gpuscope_dataloader_*`, one series per loader, labelled
//! `loader` with the probe's number for it), its `/dev/shm`, the loader
//! failures it kept, and the framework's versions. Every series carries
//! the process's labels, the job's (`rank`, `job_id`, `world_size`)
//! included, and no `gpu`: a DataLoader feeds the process, not a device.
//! A process whose probe does not report them has none of these series.

use super::process::Who;
use super::{counter, gauge, info};
use crate::model::{DataLoaderStats, FrameworkEnvironment, InputPipeline};
use crate::serve::encode::{Def, Encoder, Value};
use crate::serve::labels;

pub static DATA_WAIT: Def = gauge(
    "gpuscope_process_data_wait_ratio",
    Some("ratio"),
    "Share of wall time, 0 to 1, the process's training thread waited for its next batch over the probe's \
     window (30 s): the largest of its DataLoaders'.",
);
pub static SHM_SIZE: Def = gauge(
    "gpuscope_process_shm_size_bytes",
    Some("bytes"),
    "Size of the /dev/shm the process sees (its container's), from its own statvfs.",
);
pub static SHM_FREE: Def =
    gauge("gpuscope_process_shm_free_bytes", Some("bytes"), "Free bytes in the /dev/shm the process sees.");
pub static SHM_NEED: Def = gauge(
    "gpuscope_process_shm_need_bytes",
    Some("bytes"),
    "What the process's live DataLoaders need in /dev/shm in flight: batch bytes x (prefetch_factor x \
     num_workers + 2), summed.",
);
pub static FAILURES: Def = gauge(
    "gpuscope_process_dataloader_failures",
    None,
    "DataLoader failures the probe keeps (its latest 4), by kind; a gauge: the oldest are let go.",
);
pub static LOADER_WAIT: Def = gauge(
    "gpuscope_dataloader_wait_ratio",
    Some("ratio"),
    "Share of wall time, 0 to 1, the loader's consuming thread spent waiting in __next__ (each epoch's first \
     batch apart).",
);
pub static LOADER_RATE: Def = gauge(
    "gpuscope_dataloader_batches_per_second",
    None,
    "Batches the loader gave over the probe's window, per second.",
);
pub static LOADER_WAIT_PER_BATCH: Def = gauge(
    "gpuscope_dataloader_wait_per_batch_seconds",
    Some("seconds"),
    "Mean wait for a batch over the probe's window (each epoch's first batch apart).",
);
pub static LOADER_BATCHES: Def =
    counter("gpuscope_dataloader_batches", None, "Batches the loader gave since the probe first saw it.");
pub static LOADER_WORKERS: Def =
    gauge("gpuscope_dataloader_num_workers", None, "The loader's num_workers (0: batches made in the trainer).");
pub static LOADER_READY: Def =
    gauge("gpuscope_dataloader_batches_ready", None, "Batches ready for the next __next__ (the data queue's size).");
pub static FRAMEWORK: Def = info(
    "gpuscope_process_framework",
    "The versions a probed PyTorch process runs with: torch, the CUDA or HIP it was built for, cuDNN as \
     loaded (always 1).",
);

pub static ALL: &[&Def] = &[
    &DATA_WAIT,
    &SHM_SIZE,
    &SHM_FREE,
    &SHM_NEED,
    &FAILURES,
    &LOADER_WAIT,
    &LOADER_RATE,
    &LOADER_WAIT_PER_BATCH,
    &LOADER_BATCHES,
    &LOADER_WORKERS,
    &LOADER_READY,
    &FRAMEWORK,
];

/// The most loaders with series of their own per process: what the probe
/// keeps. A file may hold more (`probe::files` refuses only twice as
/// many); the rest still count in the process's wait share.
pub const MAX_LOADERS: usize = 8;

type Reading = fn(&InputPipeline) -> Option<Value>;

static PROCESS: [(&Def, Reading); 4] = [
    (&DATA_WAIT, |i| i.wait_share().map(Value::Float)),
    (&SHM_SIZE, |i| i.shm.as_ref()?.total.map(Value::Int)),
    (&SHM_FREE, |i| i.shm.as_ref()?.free.map(Value::Int)),
    (&SHM_NEED, |i| i.shm.as_ref()?.need.map(Value::Int)),
];

type LoaderReading = fn(&DataLoaderStats) -> Option<Value>;

static LOADER: [(&Def, LoaderReading); 6] = [
    (&LOADER_WAIT, |l| l.wait_share.map(Value::Float)),
    (&LOADER_RATE, |l| l.batches_per_s.map(Value::Float)),
    (&LOADER_WAIT_PER_BATCH, |l| l.wait_per_batch_s.map(Value::Float)),
    (&LOADER_BATCHES, |l| Some(Value::Int(l.batches))),
    (&LOADER_WORKERS, |l| l.settings.num_workers.map(Value::from)),
    (&LOADER_READY, |l| l.batches_ready.map(Value::Int)),
];

/// The versions, bounded and made visible like every label a process
/// supplies (the probe's reader has done so already; a label is where
/// it must hold).
fn versions(env: &FrameworkEnvironment) -> [(&'static str, std::borrow::Cow<'_, str>); 4] {
    fn value(v: &Option<String>) -> std::borrow::Cow<'_, str> {
        labels::value(v.as_deref().unwrap_or(""))
    }
    [
        ("torch_version", value(&env.torch_version)),
        ("cuda_version", value(&env.cuda_version)),
        ("hip_version", value(&env.hip_version)),
        ("cudnn_version", value(&env.cudnn_version)),
    ]
}

/// A process's labels, `gpu` left out (see `Who::process_labels`).
type Labels<'a> = [(&'static str, &'a str); 10];

pub(super) fn write(enc: &mut Encoder, who: &[Who]) {
    let probed: Vec<(Labels, &InputPipeline)> =
        who.iter().filter_map(|w| Some((w.process_labels(), w.process.input.as_deref()?))).collect();
    for (def, read) in &PROCESS {
        let mut f = enc.family(def);
        for (labels, input) in &probed {
            f.sample(labels, read(input));
        }
    }
    let mut f = enc.family(&FAILURES);
    for (labels, input) in &probed {
        // Only the kinds that happened: eight zeros for each probed process
        // would be most of its series and say little.
        let mut counts = std::collections::BTreeMap::new();
        input.failures.iter().for_each(|f| *counts.entry(f.kind.word()).or_insert(0u64) += 1);
        for (kind, n) in counts {
            let mut labels = labels.to_vec();
            labels.push(("kind", kind));
            f.sample(&labels, Some(n));
        }
    }
    let loaders: Vec<(&Labels, String, &DataLoaderStats)> = probed
        .iter()
        .flat_map(|(labels, input)| input.loaders.iter().take(MAX_LOADERS).map(move |l| (labels, l.id.to_string(), l)))
        .collect();
    for (def, read) in &LOADER {
        let mut f = enc.family(def);
        for (labels, id, l) in &loaders {
            let mut labels = labels.to_vec();
            labels.push(("loader", id));
            f.sample(&labels, read(l));
        }
    }
    let mut f = enc.family(&FRAMEWORK);
    for w in who {
        let Some(env) = w.process.environment.as_deref() else { continue };
        let versions = versions(env);
        let mut labels = w.process_labels().to_vec();
        labels.extend(versions.iter().map(|(name, v)| (*name, v.as_ref())));
        f.sample(&labels, Some(1u64));
    }
}
