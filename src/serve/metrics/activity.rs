//! The activity counters (NVML GPM, Hopper and newer): the families
//! dcgm-exporter publishes as `DCGM_FI_PROF_*`, once per GPU
//! (`gpuscope_gpu_*`, written by `gpu.rs`) and once per MIG device
//! (`gpuscope_mig_*`, by `mig.rs`, where they are its GPU instance's).
//! Each pair shares a help text and a reading, so the two cannot drift.
//!
//! PCIe and NVLink rates get names of their own (`gpm_`): the families
//! without it read other counters over another window (PCIe in 20 ms,
//! NVLink payload only), and a series that changed meaning with the board
//! would break the graphs drawn from it.
//!
//! Where the counters are absent their families have no sample, and
//! `*_activity_unavailable` says why, so that "no GPM" and "idle" differ.

use super::gauge;
use crate::model::Activity;
use crate::serve::encode::{Def, Value};

/// The GPU's family and the MIG device's: one figure, two label sets.
pub type Pair = [Def; 2];

const fn ratio(gpu: &'static str, mig: &'static str, help: &'static str) -> Pair {
    [gauge(gpu, Some("ratio"), help), gauge(mig, Some("ratio"), help)]
}

const fn rate(gpu: &'static str, mig: &'static str, help: &'static str) -> Pair {
    [gauge(gpu, Some("bytes_per_second"), help), gauge(mig, Some("bytes_per_second"), help)]
}

pub static SM_ACTIVE: Pair = ratio(
    "gpuscope_gpu_sm_active_ratio",
    "gpuscope_mig_sm_active_ratio",
    "Share of time an average SM had a warp resident, 0 to 1 (DCGM_FI_PROF_SM_ACTIVE).",
);
pub static SM_OCCUPANCY: Pair = ratio(
    "gpuscope_gpu_sm_occupancy_ratio",
    "gpuscope_mig_sm_occupancy_ratio",
    "Warps resident on an average SM, of the most it holds, 0 to 1 (DCGM_FI_PROF_SM_OCCUPANCY).",
);
pub static TENSOR_ACTIVE: Pair = ratio(
    "gpuscope_gpu_tensor_active_ratio",
    "gpuscope_mig_tensor_active_ratio",
    "Share of time any tensor pipe was busy, 0 to 1 (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE).",
);
pub static TENSOR_HMMA: Pair = ratio(
    "gpuscope_gpu_tensor_hmma_active_ratio",
    "gpuscope_mig_tensor_hmma_active_ratio",
    "Share of time the half precision (fp16, bf16) tensor pipe was busy, 0 to 1 (DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE).",
);
pub static TENSOR_IMMA: Pair = ratio(
    "gpuscope_gpu_tensor_imma_active_ratio",
    "gpuscope_mig_tensor_imma_active_ratio",
    "Share of time the integer tensor pipe was busy, 0 to 1 (DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE).",
);
pub static TENSOR_DFMA: Pair = ratio(
    "gpuscope_gpu_tensor_dfma_active_ratio",
    "gpuscope_mig_tensor_dfma_active_ratio",
    "Share of time the double precision tensor pipe was busy, 0 to 1 (DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE).",
);
pub static DRAM_ACTIVE: Pair = ratio(
    "gpuscope_gpu_dram_active_ratio",
    "gpuscope_mig_dram_active_ratio",
    "Share of time device memory was sending or receiving data, 0 to 1 (DCGM_FI_PROF_DRAM_ACTIVE).",
);
pub static FP64_ACTIVE: Pair = ratio(
    "gpuscope_gpu_fp64_active_ratio",
    "gpuscope_mig_fp64_active_ratio",
    "Share of time the fp64 pipe was busy, 0 to 1 (DCGM_FI_PROF_PIPE_FP64_ACTIVE).",
);
pub static FP32_ACTIVE: Pair = ratio(
    "gpuscope_gpu_fp32_active_ratio",
    "gpuscope_mig_fp32_active_ratio",
    "Share of time the fp32 pipe was busy, 0 to 1 (DCGM_FI_PROF_PIPE_FP32_ACTIVE).",
);
pub static FP16_ACTIVE: Pair = ratio(
    "gpuscope_gpu_fp16_active_ratio",
    "gpuscope_mig_fp16_active_ratio",
    "Share of time the fp16 pipe was busy, 0 to 1 (DCGM_FI_PROF_PIPE_FP16_ACTIVE).",
);
pub static PCIE_TX: Pair = rate(
    "gpuscope_gpu_gpm_pcie_tx_bytes_per_second",
    "gpuscope_mig_gpm_pcie_tx_bytes_per_second",
    "PCIe data sent (GPU to host) over the activity sample (DCGM_FI_PROF_PCIE_TX_BYTES).",
);
pub static PCIE_RX: Pair = rate(
    "gpuscope_gpu_gpm_pcie_rx_bytes_per_second",
    "gpuscope_mig_gpm_pcie_rx_bytes_per_second",
    "PCIe data received (host to GPU) over the activity sample (DCGM_FI_PROF_PCIE_RX_BYTES).",
);
pub static NVLINK_TX: Pair = rate(
    "gpuscope_gpu_gpm_nvlink_tx_bytes_per_second",
    "gpuscope_mig_gpm_nvlink_tx_bytes_per_second",
    "NVLink data sent over all links over the activity sample (DCGM_FI_PROF_NVLINK_TX_BYTES).",
);
pub static NVLINK_RX: Pair = rate(
    "gpuscope_gpu_gpm_nvlink_rx_bytes_per_second",
    "gpuscope_mig_gpm_nvlink_rx_bytes_per_second",
    "NVLink data received over all links over the activity sample (DCGM_FI_PROF_NVLINK_RX_BYTES).",
);
pub static UNAVAILABLE: Pair = {
    let help = "1, with the reason the activity counters are absent (not_supported, no_permission, failed, \
                first_sample, not_read); no sample while they are read.";
    [gauge("gpuscope_gpu_activity_unavailable", None, help), gauge("gpuscope_mig_activity_unavailable", None, help)]
};

pub type Reading = fn(&Activity) -> Option<Value>;

fn share(percent: Option<f64>) -> Option<Value> {
    percent.map(|p| Value::Float(p / 100.0))
}

fn bytes(rate: Option<u64>) -> Option<Value> {
    rate.map(Value::Int)
}

/// Every counter family, in the order they are written.
pub static READINGS: [(&Pair, Reading); 14] = [
    (&SM_ACTIVE, |a| share(a.sm_active)),
    (&SM_OCCUPANCY, |a| share(a.sm_occupancy)),
    (&TENSOR_ACTIVE, |a| share(a.tensor_active)),
    (&TENSOR_HMMA, |a| share(a.tensor_hmma)),
    (&TENSOR_IMMA, |a| share(a.tensor_imma)),
    (&TENSOR_DFMA, |a| share(a.tensor_dfma)),
    (&DRAM_ACTIVE, |a| share(a.dram_active)),
    (&FP64_ACTIVE, |a| share(a.fp64_active)),
    (&FP32_ACTIVE, |a| share(a.fp32_active)),
    (&FP16_ACTIVE, |a| share(a.fp16_active)),
    (&PCIE_TX, |a| bytes(a.pcie_tx_bytes_per_s)),
    (&PCIE_RX, |a| bytes(a.pcie_rx_bytes_per_s)),
    (&NVLINK_TX, |a| bytes(a.nvlink_tx_bytes_per_s)),
    (&NVLINK_RX, |a| bytes(a.nvlink_rx_bytes_per_s)),
];

/// Where 0 is the GPU's families and 1 the MIG device's: every family of
/// that side, the reason's last.
pub fn families(side: usize) -> impl Iterator<Item = &'static Def> {
    READINGS.iter().map(move |(pair, _)| &pair[side]).chain([&UNAVAILABLE[side]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_label_is_the_json_word() {
        use crate::model::ActivityUnavailable::*;
        for why in [NotSupported, NoPermission, Failed, FirstSample, NotRead, Unknown] {
            assert_eq!(serde_json::to_value(why).unwrap(), why.word(), "{why:?}");
        }
    }

    #[test]
    fn a_gpu_and_a_mig_family_differ_only_by_prefix() {
        for side in [0, 1] {
            assert_eq!(families(side).count(), READINGS.len() + 1);
        }
        for (gpu, mig) in families(0).zip(families(1)) {
            assert_eq!(gpu.name.replacen("gpuscope_gpu_", "gpuscope_mig_", 1), mig.name);
            assert_eq!((gpu.unit, gpu.help), (mig.unit, mig.help));
        }
    }
}
