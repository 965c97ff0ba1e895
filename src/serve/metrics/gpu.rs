//! Per-GPU families, each labelled `gpu` (NVML's index) and `uuid`; the
//! activity counters' are in `activity.rs`.

use super::{activity, counter, gauge, info};
use crate::model::{Gpu, GpuAllocator, GpuState, Snapshot};
use crate::serve::encode::{Def, Encoder, Value};

pub static INFO: Def = info("gpuscope_gpu", "Identity of a GPU: its name and PCI bus id (always 1).");
pub static LOST: Def = gauge("gpuscope_gpu_lost", None, "1 when the GPU has fallen off the bus, else 0.");
pub static MEMORY_TOTAL: Def = gauge("gpuscope_gpu_memory_total_bytes", Some("bytes"), "Device memory.");
pub static MEMORY_USED: Def = gauge("gpuscope_gpu_memory_used_bytes", Some("bytes"), "Device memory in use.");
pub static MEMORY_FREE: Def = gauge("gpuscope_gpu_memory_free_bytes", Some("bytes"), "Device memory free.");
pub static MEMORY_DRIVER_RESERVED: Def = gauge(
    "gpuscope_gpu_memory_driver_reserved_bytes",
    Some("bytes"),
    "Device memory the driver keeps back for itself (not PyTorch's reserved memory).",
);
pub static UTIL_GPU: Def =
    gauge("gpuscope_gpu_utilization_ratio", Some("ratio"), "Share of time a kernel ran, 0 to 1.");
pub static UTIL_MEMORY: Def = gauge(
    "gpuscope_gpu_memory_utilization_ratio",
    Some("ratio"),
    "Share of time device memory was read or written, 0 to 1.",
);
pub static UTIL_ENCODER: Def =
    gauge("gpuscope_gpu_encoder_utilization_ratio", Some("ratio"), "Video encoder utilisation, 0 to 1.");
pub static UTIL_DECODER: Def =
    gauge("gpuscope_gpu_decoder_utilization_ratio", Some("ratio"), "Video decoder utilisation, 0 to 1.");
pub static TEMPERATURE: Def = gauge("gpuscope_gpu_temperature_celsius", Some("celsius"), "GPU temperature.");
pub static FAN: Def = gauge("gpuscope_gpu_fan_speed_ratio", Some("ratio"), "Fan speed, 0 to 1 of its maximum.");
pub static POWER_DRAW: Def = gauge("gpuscope_gpu_power_draw_watts", Some("watts"), "Power draw.");
/// A counter in joules, the base unit Prometheus names want (its `rate()`
/// is watts); NVML counts millijoules since the driver loaded, so it
/// restarts at a driver reload, which `rate()` takes as a counter reset.
pub static ENERGY: Def = counter(
    "gpuscope_gpu_energy_joules",
    Some("joules"),
    "Energy used since the driver was last loaded (Volta and newer).",
);
pub static POWER_LIMIT: Def = gauge("gpuscope_gpu_power_limit_watts", Some("watts"), "Power management limit.");
pub static SM_CLOCK: Def = gauge("gpuscope_gpu_sm_clock_hertz", Some("hertz"), "SM clock.");
pub static MEMORY_CLOCK: Def = gauge("gpuscope_gpu_memory_clock_hertz", Some("hertz"), "Memory clock.");
pub static PCIE_TX: Def =
    gauge("gpuscope_gpu_pcie_tx_bytes_per_second", None, "PCIe transmit throughput (GPU to host).");
pub static PCIE_RX: Def =
    gauge("gpuscope_gpu_pcie_rx_bytes_per_second", None, "PCIe receive throughput (host to GPU).");
pub static POWER_MANAGEMENT_LIMIT: Def = gauge(
    "gpuscope_gpu_power_management_limit_watts",
    Some("watts"),
    "The power limit software set (nvidia-smi -pl); the enforced one may be lower.",
);
pub static MAX_SM_CLOCK: Def = gauge("gpuscope_gpu_max_sm_clock_hertz", Some("hertz"), "Highest SM clock by design.");
pub static PERSISTENCE: Def =
    gauge("gpuscope_gpu_persistence_mode", None, "1 when persistence mode is on (the driver stays loaded), else 0.");
pub static ECC_MODE: Def = gauge("gpuscope_gpu_ecc_mode", None, "1 when ECC is on, else 0.");
pub static ECC_CORRECTED_VOLATILE: Def = counter(
    "gpuscope_gpu_ecc_corrected_volatile_errors",
    None,
    "Corrected ECC errors across the chip since the driver loaded.",
);
pub static ECC_UNCORRECTED_VOLATILE: Def = counter(
    "gpuscope_gpu_ecc_uncorrected_volatile_errors",
    None,
    "Uncorrected ECC errors across the chip since the driver loaded.",
);
pub static ECC_CORRECTED_AGGREGATE: Def = counter(
    "gpuscope_gpu_ecc_corrected_aggregate_errors",
    None,
    "Corrected ECC errors across the chip over the board's lifetime.",
);
pub static ECC_UNCORRECTED_AGGREGATE: Def = counter(
    "gpuscope_gpu_ecc_uncorrected_aggregate_errors",
    None,
    "Uncorrected ECC errors across the chip over the board's lifetime.",
);
pub static RETIRED_PAGES_PENDING: Def = gauge(
    "gpuscope_gpu_retired_pages_pending",
    None,
    "1 when device memory pages wait to be retired at the next reboot, else 0.",
);
pub static UNIFIED_MEMORY: Def = gauge(
    "gpuscope_gpu_unified_memory",
    None,
    "1 where the GPU shares the host's memory (GB10) and the memory figures are the machine's, else 0.",
);
pub static BAR1_TOTAL: Def = gauge("gpuscope_gpu_bar1_memory_total_bytes", Some("bytes"), "BAR1 aperture.");
pub static BAR1_USED: Def = gauge("gpuscope_gpu_bar1_memory_used_bytes", Some("bytes"), "BAR1 aperture in use.");
pub static NVLINK_ACTIVE: Def =
    gauge("gpuscope_gpu_nvlink_links_active", None, "NVLink links up; absent on a board without NVLink.");
pub static NVLINK_LINKS: Def = gauge("gpuscope_gpu_nvlink_links", None, "NVLink links the board has.");
pub static NVLINK_TX: Def = gauge(
    "gpuscope_gpu_nvlink_tx_bytes_per_second",
    Some("bytes_per_second"),
    "NVLink data sent over all links, between the last two readings.",
);
pub static NVLINK_RX: Def = gauge(
    "gpuscope_gpu_nvlink_rx_bytes_per_second",
    Some("bytes_per_second"),
    "NVLink data received over all links, between the last two readings.",
);
pub static REMAPPED_CORRECTABLE: Def = gauge(
    "gpuscope_gpu_remapped_rows_correctable",
    None,
    "Memory rows remapped to spares after correctable errors (Ampere and later).",
);
pub static REMAPPED_UNCORRECTABLE: Def = gauge(
    "gpuscope_gpu_remapped_rows_uncorrectable",
    None,
    "Memory rows remapped to spares after uncorrectable errors.",
);
pub static ROW_REMAP_PENDING: Def =
    gauge("gpuscope_gpu_row_remap_pending", None, "1 when a row remapping waits for the next GPU reset, else 0.");
pub static ACCOUNTING_MODE: Def =
    gauge("gpuscope_gpu_accounting_mode", None, "1 when per-process accounting is on, else 0.");
pub static ROW_REMAP_FAILURE: Def =
    gauge("gpuscope_gpu_row_remap_failure", None, "1 when a row remapping failed (replace the board), else 0.");

pub static ALLOC_PROCESSES: Def =
    gauge("gpuscope_gpu_allocator_probed_processes", None, "Processes on the GPU whose allocator probe reports.");
pub static ALLOC_ALLOCATED: Def =
    gauge("gpuscope_gpu_allocator_allocated_bytes", Some("bytes"), "Bytes in live tensors, over probed processes.");
pub static ALLOC_RESERVED: Def = gauge(
    "gpuscope_gpu_allocator_reserved_bytes",
    Some("bytes"),
    "Bytes the probed processes' caching allocators hold from the driver.",
);
pub static ALLOC_CACHED: Def = gauge(
    "gpuscope_gpu_allocator_cached_bytes",
    Some("bytes"),
    "Reserved minus allocated: free inside the allocators, over probed processes.",
);
pub static ALLOC_INACTIVE_SPLIT: Def = gauge(
    "gpuscope_gpu_allocator_inactive_split_bytes",
    Some("bytes"),
    "Free bytes trapped in partly used segments, over probed processes.",
);
pub static ALLOC_OVERHEAD: Def = gauge(
    "gpuscope_gpu_allocator_overhead_bytes",
    Some("bytes"),
    "NVML's figure minus reserved (CUDA context, libraries), over probed processes.",
);
pub static ALLOC_UNPROBED: Def =
    gauge("gpuscope_gpu_allocator_unprobed_bytes", Some("bytes"), "What NVML attributes to processes without a probe.");

pub static ALL: &[&Def] = &[
    &INFO,
    &LOST,
    &MEMORY_TOTAL,
    &MEMORY_USED,
    &MEMORY_FREE,
    &MEMORY_DRIVER_RESERVED,
    &UTIL_GPU,
    &UTIL_MEMORY,
    &UTIL_ENCODER,
    &UTIL_DECODER,
    &TEMPERATURE,
    &FAN,
    &POWER_DRAW,
    &ENERGY,
    &POWER_LIMIT,
    &SM_CLOCK,
    &MEMORY_CLOCK,
    &PCIE_TX,
    &PCIE_RX,
    &POWER_MANAGEMENT_LIMIT,
    &MAX_SM_CLOCK,
    &PERSISTENCE,
    &ECC_MODE,
    &ECC_CORRECTED_VOLATILE,
    &ECC_UNCORRECTED_VOLATILE,
    &ECC_CORRECTED_AGGREGATE,
    &ECC_UNCORRECTED_AGGREGATE,
    &RETIRED_PAGES_PENDING,
    &UNIFIED_MEMORY,
    &BAR1_TOTAL,
    &BAR1_USED,
    &NVLINK_LINKS,
    &NVLINK_ACTIVE,
    &NVLINK_TX,
    &NVLINK_RX,
    &REMAPPED_CORRECTABLE,
    &REMAPPED_UNCORRECTABLE,
    &ROW_REMAP_PENDING,
    &ROW_REMAP_FAILURE,
    &ACCOUNTING_MODE,
    &ALLOC_PROCESSES,
    &ALLOC_ALLOCATED,
    &ALLOC_RESERVED,
    &ALLOC_CACHED,
    &ALLOC_INACTIVE_SPLIT,
    &ALLOC_OVERHEAD,
    &ALLOC_UNPROBED,
];

fn percent(p: Option<u32>) -> Option<f64> {
    p.map(|p| f64::from(p) / 100.0)
}

fn mhz(f: Option<u32>) -> Option<u64> {
    f.map(|f| u64::from(f) * 1_000_000)
}

type Reading = fn(&Gpu) -> Option<Value>;
type AllocReading = fn(&GpuAllocator) -> Option<u64>;

fn v<T: Into<Value>>(x: Option<T>) -> Option<Value> {
    x.map(Into::into)
}

static READINGS: [(&Def, Reading); 39] = [
    (&LOST, |g| Some((g.state == GpuState::Lost).into())),
    (&MEMORY_TOTAL, |g| v(g.memory.total)),
    (&MEMORY_USED, |g| v(g.memory.used)),
    (&MEMORY_FREE, |g| v(g.memory.free)),
    (&MEMORY_DRIVER_RESERVED, |g| v(g.memory.driver_reserved)),
    (&UTIL_GPU, |g| v(percent(g.utilization.gpu))),
    (&UTIL_MEMORY, |g| v(percent(g.utilization.memory))),
    (&UTIL_ENCODER, |g| v(percent(g.utilization.encoder))),
    (&UTIL_DECODER, |g| v(percent(g.utilization.decoder))),
    (&TEMPERATURE, |g| v(g.temperature_c)),
    (&FAN, |g| v(percent(g.fan_percent))),
    (&POWER_DRAW, |g| v(g.power_draw_w)),
    (&ENERGY, |g| v(g.energy_mj.map(|mj| mj as f64 / 1000.0))),
    (&POWER_LIMIT, |g| v(g.power_limit_w)),
    (&SM_CLOCK, |g| v(mhz(g.clocks.sm_mhz))),
    (&MEMORY_CLOCK, |g| v(mhz(g.clocks.memory_mhz))),
    (&PCIE_TX, |g| v(g.pcie.tx_bytes_per_s)),
    (&PCIE_RX, |g| v(g.pcie.rx_bytes_per_s)),
    (&POWER_MANAGEMENT_LIMIT, |g| v(g.power_management_limit_w)),
    (&MAX_SM_CLOCK, |g| v(mhz(g.max_clocks.sm_mhz))),
    (&PERSISTENCE, |g| v(g.persistence_mode)),
    (&ECC_MODE, |g| v(g.ecc.mode_current)),
    (&ECC_CORRECTED_VOLATILE, |g| v(g.ecc.corrected_volatile)),
    (&ECC_UNCORRECTED_VOLATILE, |g| v(g.ecc.uncorrected_volatile)),
    (&ECC_CORRECTED_AGGREGATE, |g| v(g.ecc.corrected_aggregate)),
    (&ECC_UNCORRECTED_AGGREGATE, |g| v(g.ecc.uncorrected_aggregate)),
    (&RETIRED_PAGES_PENDING, |g| v(g.ecc.retired_pages_pending)),
    (&UNIFIED_MEMORY, |g| v(g.unified_memory)),
    (&BAR1_TOTAL, |g| v(g.bar1_memory.total)),
    (&BAR1_USED, |g| v(g.bar1_memory.used)),
    (&NVLINK_LINKS, |g| g.nvlink.as_ref().map(|n| (n.links.len() as u64).into())),
    (&NVLINK_ACTIVE, |g| g.nvlink.as_ref().map(|n| (n.links.iter().filter(|l| l.active).count() as u64).into())),
    (&NVLINK_TX, |g| v(g.nvlink.as_ref().and_then(|n| n.tx_bytes_per_s))),
    (&NVLINK_RX, |g| v(g.nvlink.as_ref().and_then(|n| n.rx_bytes_per_s))),
    (&REMAPPED_CORRECTABLE, |g| v(g.remapped_rows.correctable)),
    (&REMAPPED_UNCORRECTABLE, |g| v(g.remapped_rows.uncorrectable)),
    (&ROW_REMAP_PENDING, |g| v(g.remapped_rows.pending)),
    (&ROW_REMAP_FAILURE, |g| v(g.remapped_rows.failure)),
    (&ACCOUNTING_MODE, |g| v(g.accounting.as_ref().map(|a| a.enabled))),
];

static ALLOCATOR: [(&Def, AllocReading); 7] = [
    (&ALLOC_PROCESSES, |a| Some(a.probed_processes.into())),
    (&ALLOC_ALLOCATED, |a| a.allocated),
    (&ALLOC_RESERVED, |a| a.reserved),
    (&ALLOC_CACHED, |a| a.cached),
    (&ALLOC_INACTIVE_SPLIT, |a| a.inactive_split),
    (&ALLOC_OVERHEAD, |a| a.overhead),
    (&ALLOC_UNPROBED, |a| a.unprobed),
];

pub fn write(enc: &mut Encoder, snap: &Snapshot) {
    // (index as text, uuid, the GPU): the labels every family repeats.
    let ids: Vec<(String, &str, &Gpu)> =
        snap.gpus.iter().map(|g| (g.index.to_string(), g.uuid.as_deref().unwrap_or(""), g)).collect();
    let mut f = enc.family(&INFO);
    for (index, uuid, g) in &ids {
        let (name, bus) = (g.name.as_deref().unwrap_or(""), g.pci_bus_id.as_deref().unwrap_or(""));
        f.sample(&[("gpu", index), ("uuid", uuid), ("name", name), ("pci_bus_id", bus)], Some(1u64));
    }
    let per_gpu = |enc: &mut Encoder, def: &'static Def, read: &dyn Fn(&Gpu) -> Option<Value>| {
        let mut f = enc.family(def);
        for (index, uuid, g) in &ids {
            f.sample(&[("gpu", index), ("uuid", uuid)], read(g));
        }
    };
    for (def, read) in READINGS {
        per_gpu(enc, def, &read);
    }
    for (def, read) in ALLOCATOR {
        per_gpu(enc, def, &|g| g.allocator.as_ref().and_then(read).map(Value::from));
    }
    for (pair, read) in &activity::READINGS {
        per_gpu(enc, &pair[0], &|g| g.activity.as_ref().and_then(read));
    }
    let mut f = enc.family(&activity::UNAVAILABLE[0]);
    for (index, uuid, g) in &ids {
        if let Some(why) = g.activity_unavailable {
            f.sample(&[("gpu", index), ("uuid", uuid), ("reason", why.word())], Some(1u64));
        }
    }
}
