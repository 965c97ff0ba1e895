//! `gpuscope select`: the GPUs a job may take, as a `CUDA_VISIBLE_DEVICES`
//! value, in place of the free-GPU loop every lab writes by hand.
//!
//! What the value may hold follows CUDA's reading of the variable (the CUDA
//! Programming Guide, "CUDA Environment Variables", and PyTorch's model of
//! it in `torch/cuda/__init__.py` `_parse_visible_devices`, modelled in
//! `collect/visible_devices.rs`): the first entry decides whether the list
//! is of indices, `GPU-` UUIDs or `MIG-` UUIDs, so one answer never mixes
//! whole GPUs and MIG devices. Indices are CUDA's enumeration, which is
//! NVML's PCI bus order only under `CUDA_DEVICE_ORDER=PCI_BUS_ID` (CUDA's
//! default is fastest first): UUIDs are the default for that reason.

use serde::Serialize;

use crate::model::{GpuState, Snapshot};
use crate::util::units;

/// What a GPU must offer to be picked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Criteria {
    /// How many devices the job needs; fewer fitting is a failure.
    pub count: usize,
    /// Bytes free at least (with `count_cached_free`, cache counted).
    pub min_free: Option<u64>,
    /// GPU utilisation at most, percent; an unknown utilisation fails it.
    pub max_util: Option<u32>,
    /// Only devices no process holds.
    pub no_processes: bool,
    /// Count memory probed processes reserve but do not use (their
    /// allocators' cache, reserved − allocated) as free: what the owner's
    /// `torch.cuda.empty_cache()` could hand back.
    pub count_cached_free: bool,
    /// MIG devices instead of whole GPUs.
    pub mig: bool,
}

/// How the answer is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `GPU-…` / `MIG-…` UUIDs, right whatever `CUDA_DEVICE_ORDER` says.
    Uuid,
    /// NVML's indices (PCI bus order): CUDA's only with
    /// `CUDA_DEVICE_ORDER=PCI_BUS_ID`.
    Index,
    /// A JSON array of the picks with their figures.
    Json,
}

/// One device that fits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pick {
    /// NVML's index of the GPU (the parent, for a MIG device).
    pub index: u32,
    /// The MIG device index within the GPU; `None` for a whole GPU.
    pub mig_device: Option<u32>,
    pub uuid: Option<String>,
    pub name: Option<String>,
    /// Free bytes as NVML reports them.
    pub memory_free: u64,
    /// The probed processes' cache on the device (reserved − allocated);
    /// `None` without a probe.
    pub cached: Option<u64>,
    /// What of it `torch.cuda.empty_cache()` could hand back: the cache
    /// less the inactive split and private pools, which it cannot free;
    /// `None` where no probe says.
    pub releasable: Option<u64>,
    /// What counted as free: `memory_free`, plus `releasable` when asked.
    pub counted_free: u64,
    /// Percent; for a MIG device its parent GPU's (NVML keeps none per MIG device).
    pub utilization: Option<u32>,
    pub processes: usize,
}

/// The devices that fit, best first (most counted free memory, then the
/// least busy, then the lowest index), and why each other one does not.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub fits: Vec<Pick>,
    pub rejected: Vec<(String, String)>,
}

impl Outcome {
    /// The `count` best, in index order (the order CUDA will number them).
    /// `None` when fewer fit.
    pub fn chosen(&self, count: usize) -> Option<Vec<&Pick>> {
        if self.fits.len() < count {
            return None;
        }
        let mut picked: Vec<&Pick> = self.fits.iter().take(count).collect();
        picked.sort_by_key(|p| (p.index, p.mig_device));
        Some(picked)
    }

    /// Why there are not enough, for stderr.
    pub fn shortfall(&self, criteria: &Criteria) -> String {
        let unit = if criteria.mig { "MIG device" } else { "GPU" };
        let mut text = format!(
            "{} {unit}{} fit{}, {} asked",
            self.fits.len(),
            if self.fits.len() == 1 { "" } else { "s" },
            if self.fits.len() == 1 { "s" } else { "" },
            criteria.count
        );
        for (device, why) in &self.rejected {
            text.push_str(&format!("\n  {device}: {why}"));
        }
        text
    }
}

/// Judges every device of the snapshot against the criteria.
pub fn choose(snap: &Snapshot, criteria: &Criteria) -> Outcome {
    let mut fits = Vec::new();
    let mut rejected = Vec::new();
    for gpu in &snap.gpus {
        let label = format!("GPU {}", gpu.index);
        if gpu.state != GpuState::Ok {
            let why = gpu.error.clone().unwrap_or_else(|| format!("{:?}", gpu.state).to_lowercase());
            rejected.push((label, why));
            continue;
        }
        let mig_on = gpu.mig_mode.as_ref().is_some_and(|m| m.current);
        // A GPU with MIG on takes work only through its MIG devices (CUDA
        // enumerates those, not the GPU); without MIG there are none.
        match (criteria.mig, mig_on) {
            (false, true) => {
                rejected.push((label, "MIG is on: its MIG devices are what CUDA runs on (use --mig)".into()));
                continue;
            }
            (true, false) => {
                rejected.push((label, "MIG is off".into()));
                continue;
            }
            _ => {}
        }
        let holders = |mig: Option<u32>| {
            snap.processes
                .iter()
                .filter(|p| p.gpus.iter().any(|g| g.index == gpu.index && (mig.is_none() || g.mig_device == mig)))
                .count()
        };
        if !criteria.mig {
            let candidate = Candidate {
                free: gpu.memory.free,
                cached: gpu.allocator.as_ref().and_then(|a| a.cached),
                releasable: probed_on(snap, gpu.index, None, |d| d.releasable),
                utilization: gpu.utilization.gpu,
                processes: holders(None),
            };
            match candidate.judge(criteria) {
                Ok(counted_free) => fits.push(candidate.pick(gpu, None, gpu.uuid.clone(), counted_free)),
                Err(why) => rejected.push((label, why)),
            }
            continue;
        }
        for mig in &gpu.mig_devices {
            let candidate = Candidate {
                free: mig.memory.free,
                cached: probed_on(snap, gpu.index, Some(mig.index), |d| d.cached),
                releasable: probed_on(snap, gpu.index, Some(mig.index), |d| d.releasable),
                utilization: gpu.utilization.gpu,
                processes: holders(Some(mig.index)),
            };
            let label = format!("GPU {} MIG {}", gpu.index, mig.index);
            match candidate.judge(criteria) {
                Ok(counted_free) => fits.push(candidate.pick(gpu, Some(mig.index), mig.uuid.clone(), counted_free)),
                Err(why) => rejected.push((label, why)),
            }
        }
    }
    fits.sort_by(|a, b| {
        b.counted_free
            .cmp(&a.counted_free)
            .then(a.utilization.unwrap_or(u32::MAX).cmp(&b.utilization.unwrap_or(u32::MAX)))
            .then((a.index, a.mig_device).cmp(&(b.index, b.mig_device)))
    });
    Outcome { fits, rejected }
}

/// A figure summed over the probes' devices matched to a GPU (any of its
/// MIG devices where `mig` is `None`); `None` where no probe reports it.
fn probed_on(
    snap: &Snapshot,
    gpu: u32,
    mig: Option<u32>,
    figure: impl Fn(&crate::model::DeviceAllocator) -> Option<u64>,
) -> Option<u64> {
    snap.processes
        .iter()
        .filter_map(|p| p.allocator.as_deref())
        .flat_map(|a| &a.devices)
        .filter(|d| d.gpu == Some(gpu) && (mig.is_none() || d.mig_device == mig))
        .filter_map(figure)
        .reduce(u64::saturating_add)
}

struct Candidate {
    free: Option<u64>,
    cached: Option<u64>,
    releasable: Option<u64>,
    utilization: Option<u32>,
    processes: usize,
}

impl Candidate {
    /// The free memory that counts, or why the device does not fit.
    fn judge(&self, c: &Criteria) -> Result<u64, String> {
        // Unknown is not zero, and not "enough" either: a device whose
        // free memory or load NVML cannot tell is never picked blind.
        let Some(free) = self.free else { return Err("free memory unknown".into()) };
        // Only what empty_cache() could hand back: the inactive split sits
        // in segments still partly in use, and no call of the owner's
        // frees it for another job.
        let counted = if c.count_cached_free { free.saturating_add(self.releasable.unwrap_or(0)) } else { free };
        if let Some(min) = c.min_free
            && counted < min
        {
            let cache = if c.count_cached_free { " (releasable cache counted)" } else { "" };
            return Err(format!("{} free{cache}, under {}", units::bytes(counted), units::bytes(min)));
        }
        if let Some(max) = c.max_util {
            match self.utilization {
                None => return Err("utilisation unknown".into()),
                Some(u) if u > max => return Err(format!("utilisation {u}%, above {max}%")),
                Some(_) => {}
            }
        }
        if c.no_processes && self.processes > 0 {
            let n = self.processes;
            return Err(format!("{n} process{} on it", if n == 1 { "" } else { "es" }));
        }
        Ok(counted)
    }

    fn pick(&self, gpu: &crate::model::Gpu, mig: Option<u32>, uuid: Option<String>, counted_free: u64) -> Pick {
        Pick {
            index: gpu.index,
            mig_device: mig,
            uuid,
            name: gpu.name.clone(),
            memory_free: self.free.unwrap_or(0),
            cached: self.cached,
            releasable: self.releasable,
            counted_free,
            utilization: self.utilization,
            processes: self.processes,
        }
    }
}

/// The answer as printed on stdout (a line), or why it cannot be written
/// in that form.
pub fn render(picked: &[&Pick], format: Format) -> Result<String, String> {
    let ids: Result<Vec<String>, String> = match format {
        Format::Json => {
            return serde_json::to_string(picked).map(|s| s + "\n").map_err(|e| e.to_string());
        }
        Format::Index => picked
            .iter()
            .map(|p| match p.mig_device {
                None => Ok(p.index.to_string()),
                // CUDA takes MIG devices by UUID only.
                Some(_) => Err("MIG devices have no index CUDA_VISIBLE_DEVICES takes: use --format uuid".to_string()),
            })
            .collect(),
        Format::Uuid => picked
            .iter()
            .map(|p| p.uuid.clone().ok_or_else(|| format!("NVML gave no UUID for GPU {}: use --format index", p.index)))
            .collect(),
    };
    Ok(ids?.join(",") + "\n")
}

/// A size as people write it: bytes (`1048576`), binary units (`20GiB`,
/// `512MiB`, and `20G`, `512M` as nvidia-smi and PyTorch mean them) or
/// decimal ones (`20GB`); a fraction is allowed (`1.5GiB`), case and a
/// space before the unit do not matter.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let s = text.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return Err(format!("{text:?} is not a size: expected e.g. 20GiB, 512MiB, 20GB or bytes")),
    };
    if number.is_empty() || number.matches('.').count() > 1 || number.starts_with('.') || number.ends_with('.') {
        return Err(format!("{text:?} is not a size: expected a number before the unit, e.g. 20GiB"));
    }
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    let whole: u64 = whole.parse().map_err(|_| format!("{text:?} is too large"))?;
    let mut bytes = whole.checked_mul(scale).ok_or_else(|| format!("{text:?} is too large"))?;
    if !frac.is_empty() {
        // Exact decimal arithmetic: at most 9 digits of fraction matter to
        // a byte count (1 TiB / 1e9 is about a thousand bytes).
        let digits = &frac[..frac.len().min(9)];
        let num: u64 = digits.parse().map_err(|_| format!("{text:?} is not a size"))?;
        let den = 10u64.pow(digits.len() as u32);
        let part = u128::from(num) * u128::from(scale) / u128::from(den);
        bytes = bytes.checked_add(part as u64).ok_or_else(|| format!("{text:?} is too large"))?;
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests;
