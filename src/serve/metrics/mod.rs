//! What `/metrics` says about a snapshot: every family, its name, unit and
//! help, and which snapshot field it reads. Names carry base units
//! (bytes, seconds, ratio 0..1, celsius, watts, hertz); an unknown reading
//! leaves no sample rather than a 0.

mod activity;
mod gpu;
mod health;
mod input;
mod mig;
mod process;
mod status;

use crate::model::Snapshot;
use crate::serve::encode::{Def, Encoder, Format, Kind};

const fn gauge(name: &'static str, unit: Option<&'static str>, help: &'static str) -> Def {
    Def { name, kind: Kind::Gauge, unit, help }
}

const fn counter(name: &'static str, unit: Option<&'static str>, help: &'static str) -> Def {
    Def { name, kind: Kind::Counter, unit, help }
}

const fn info(name: &'static str, help: &'static str) -> Def {
    Def { name, kind: Kind::Info, unit: None, help }
}

/// Every family the exporter can emit, in the order it emits them.
pub fn families() -> impl Iterator<Item = &'static Def> {
    let gpu = gpu::ALL.iter().copied().chain(activity::families(0)).chain(health::ALL.iter().copied());
    let mig = mig::ALL.iter().copied().chain(activity::families(1));
    gpu.chain(mig).chain([process::ALL, input::ALL, status::ALL].into_iter().flatten().copied())
}

/// The names samples can carry (`_total` and `_info` included): what a
/// query or dashboard may refer to.
pub fn sample_names() -> Vec<String> {
    families().map(Def::sample_name).collect()
}

/// The part of the exposition that depends on the snapshot alone, without
/// the trailer: the same for every scrape of one snapshot, so it is cached.
pub fn encode(format: Format, snap: &Snapshot, nvml_errors: u64) -> String {
    let mut enc = Encoder::new(format);
    gpu::write(&mut enc, snap);
    health::write(&mut enc, snap);
    mig::write(&mut enc, snap);
    process::write(&mut enc, snap);
    status::write(&mut enc, snap, nvml_errors);
    enc.finish()
}

/// The part that changes with every scrape, trailer included.
pub fn per_scrape(format: Format, snapshot_age_s: f64) -> String {
    let mut enc = Encoder::new(format);
    enc.family(&status::AGE).sample(&[], Some(snapshot_age_s));
    let mut out = enc.finish();
    out.push_str(format.trailer());
    out
}

#[cfg(test)]
pub(crate) mod tests;
