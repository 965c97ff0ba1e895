//! What each Xid means and calls for, from NVIDIA's Xid catalogue: "Xid
//! Errors", https://docs.nvidia.com/deploy/xid-errors/, the catalogue for
//! Ampere and newer GPUs ("Analyzing Xid Errors with the Xid Catalog",
//! read 2026: columns Mnemonic, Description and "Resolution Bucket
//! (Immediate Action)"). NVIDIA's own NVSentinel maps the same buckets
//! (`xiderrorsmapping.csv`). The meanings are NVIDIA's descriptions in
//! gpuscope's words; the actions are the catalogue's buckets:
//! IGNORE → `None`, RESTART_APP → `RestartApp`, RESET_GPU → `ResetGpu`,
//! RESTART_BM → `RebootNode`, CHECK_MECHANICALS → `CheckHardware`,
//! UPDATE_SWFW → `UpdateSoftware`, RESTART_VM → `RestartVm`, WORKFLOW_* →
//! `FollowWorkflow`, CONTACT_SUPPORT → `ContactSupport`. Xids the
//! catalogue marks "Unused" on every current GPU are left out: one that
//! comes anyway is shown with its number and "not in the catalogue".

use crate::model::{Severity, XidAction};

/// One Xid of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub xid: u32,
    pub mnemonic: &'static str,
    pub meaning: &'static str,
    pub action: XidAction,
}

/// Critical where the GPU or the node needs a reset, a reboot or a
/// workflow that ends in one; a warning where an application failed and
/// the GPU is fine (or the Xid is not in the catalogue); info where
/// nothing needs doing.
pub fn severity(action: XidAction) -> Severity {
    match action {
        XidAction::None => Severity::Info,
        XidAction::RestartApp | XidAction::CheckHardware | XidAction::UpdateSoftware | XidAction::Unknown => {
            Severity::Warning
        }
        XidAction::ResetGpu
        | XidAction::RebootNode
        | XidAction::RestartVm
        | XidAction::FollowWorkflow
        | XidAction::ContactSupport => Severity::Critical,
    }
}

/// nvml.h, `nvmlEventData_t.eventData`: "set as 999 for unknown Xid error".
pub const UNKNOWN_XID: u32 = 999;

const fn e(xid: u32, mnemonic: &'static str, meaning: &'static str, action: XidAction) -> Entry {
    Entry { xid, mnemonic, meaning, action }
}

use XidAction::{
    CheckHardware, ContactSupport, FollowWorkflow, None as Nothing, RebootNode, ResetGpu, RestartApp, RestartVm,
    UpdateSoftware,
};

/// By Xid, ascending (`lookup` searches it).
pub const CATALOGUE: &[Entry] = &[
    e(8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "the GPU stopped processing", RestartApp),
    e(11, "ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "invalid or corrupted push buffer stream", RestartApp),
    e(
        13,
        "ROBUST_CHANNEL_GR_EXCEPTION",
        "graphics engine exception: most often the application's own fault (an out-of-bounds access, an \
         illegal instruction)",
        RestartApp,
    ),
    e(14, "ROBUST_CHANNEL_FAKE_ERROR", "a test error, injected on purpose", Nothing),
    e(25, "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "illegal push buffer stream", RestartApp),
    e(
        31,
        "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT",
        "GPU memory page fault: most often an illegal address access by the application",
        RestartApp,
    ),
    e(32, "ROBUST_CHANNEL_PBDMA_ERROR", "invalid or corrupted push buffer stream (PBDMA)", RestartApp),
    e(38, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "a firmware (FECS) watchdog timeout", Nothing),
    e(39, "ROBUST_CHANNEL_CE0_ERROR", "copy (DMA) engine 0 error", RestartApp),
    e(40, "ROBUST_CHANNEL_CE1_ERROR", "copy (DMA) engine 1 error", RestartApp),
    e(41, "ROBUST_CHANNEL_CE2_ERROR", "copy (DMA) engine 2 error", RestartApp),
    // The Ampere-and-newer catalogue's bucket is IGNORE: nothing to do for
    // the GPU. The channel the driver reset was an application's, which
    // stopped: the older catalogue (R384) calls it a user application
    // fault, and so does gpuscope.
    e(
        43,
        "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR",
        "the GPU stopped processing: the driver reset an application's channel after it faulted",
        RestartApp,
    ),
    e(44, "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "a fault during a context switch", Nothing),
    e(
        45,
        "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL",
        "preemptive cleanup after an earlier error (alone: the fabric manager; else follow the Xid that came with it)",
        FollowWorkflow,
    ),
    e(46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "a GPU timeout", ResetGpu),
    e(
        48,
        "ROBUST_CHANNEL_GPU_ECC_DBE",
        "double-bit (uncorrectable) ECC error in device memory",
        // WORKFLOW_XID_48: reset the GPU; drain and reset where Xid 63
        // or 64 come with it.
        ResetGpu,
    ),
    e(54, "SILENT_RUNNING_PWR_REDUCED_CLOCKING", "clocks reduced for lack of power", CheckHardware),
    e(60, "ROBUST_CHANNEL_SEC2_ERROR", "security engine (SEC2) error", RestartApp),
    e(62, "PMU_HALT_ERROR", "the GPU's internal micro-controller (PMU) halted", ResetGpu),
    e(
        63,
        "INFOROM_DRAM_RETIREMENT_EVENT",
        "a memory row was remapped (or a page retired): the GPU repaired a memory fault",
        Nothing,
    ),
    e(
        64,
        "INFOROM_DRAM_RETIREMENT_FAILURE",
        "a memory row remapping (or page retirement) failed to be recorded",
        ResetGpu,
    ),
    e(68, "ROBUST_CHANNEL_NVDEC0_ERROR", "video decoder (NVDEC0) error", RestartApp),
    e(69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "graphics engine class error", RestartApp),
    e(70, "ROBUST_CHANNEL_CE3_ERROR", "copy (DMA) engine 3 error", RestartApp),
    e(71, "ROBUST_CHANNEL_CE4_ERROR", "copy (DMA) engine 4 error", RestartApp),
    e(72, "ROBUST_CHANNEL_CE5_ERROR", "copy (DMA) engine 5 error", RestartApp),
    e(
        74,
        "NVLINK_ERROR",
        "NVLink error (the registers logged with it say whether the link needs a GPU reset)",
        FollowWorkflow,
    ),
    e(78, "VGPU_START_ERROR", "a vGPU could not be started", UpdateSoftware),
    e(
        79,
        "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
        "the GPU has fallen off the bus: it no longer answers over PCIe",
        RebootNode,
    ),
    e(80, "PBDMA_PUSHBUFFER_CRC_MISMATCH", "push buffer CRC mismatch", RestartApp),
    e(92, "EXCESSIVE_SBE_INTERRUPTS", "a high rate of single-bit (corrected) ECC errors", Nothing),
    e(
        94,
        "ROBUST_CHANNEL_CONTAINED_ERROR",
        "contained memory error: only the applications using the faulty memory are affected",
        RestartApp,
    ),
    e(
        95,
        "ROBUST_CHANNEL_UNCONTAINED_ERROR",
        "uncontained memory error: every application on the GPU is affected",
        ResetGpu,
    ),
    e(109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "a context-switch timeout", ResetGpu),
    e(110, "SEC_FAULT_ERROR", "a security fault", ResetGpu),
    e(119, "GSP_RPC_TIMEOUT", "the GPU System Processor (GSP) did not answer the driver in time", ResetGpu),
    e(120, "GSP_ERROR", "the GPU System Processor (GSP) firmware reported an error", ResetGpu),
    e(121, "C2C_ERROR", "a chip-to-chip (C2C) link error, corrected", Nothing),
    e(136, "ALI_TRAINING_FAIL", "NVLink training failed", ResetGpu),
    e(140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "an uncorrectable ECC error escaped containment", ResetGpu),
    e(142, "ROBUST_CHANNEL_NVENC3_ERROR", "video encoder (NVENC3) error", ContactSupport),
    e(143, "GPU_INIT_ERROR", "the GPU failed to initialise", ResetGpu),
    e(144, "NVLINK_SAW_ERROR", "NVLink (5th generation) SAW error", FollowWorkflow),
    e(145, "NVLINK_RLW_ERROR", "NVLink (5th generation) RLW error", FollowWorkflow),
    e(146, "NVLINK_TLW_ERROR", "NVLink (5th generation) TLW error", FollowWorkflow),
    e(147, "NVLINK_TREX_ERROR", "NVLink (5th generation) TREX error", FollowWorkflow),
    e(148, "NVLINK_NVLPW_CTRL_ERROR", "NVLink (5th generation) NVLPW control error", FollowWorkflow),
    e(149, "NVLINK_NETIR_ERROR", "NVLink (5th generation) NETIR error", FollowWorkflow),
    e(150, "NVLINK_MSE_ERROR", "NVLink (5th generation) MSE error", FollowWorkflow),
    e(151, "ROBUST_CHANNEL_KEY_ROTATION_ERROR", "a confidential-computing key rotation error", RestartVm),
    e(
        154,
        "GPU_RECOVERY_ACTION_CHANGED",
        "the driver's recommended recovery action changed (gpuscope reads it as recovery_action)",
        Nothing,
    ),
    e(155, "NVLINK_SW_DEFINED_ERROR", "an NVLink error the software defines", ResetGpu),
    e(156, "RESOURCE_RETIREMENT_EVENT", "a GPU resource was retired", ResetGpu),
    e(158, "GPU_FATAL_TIMEOUT", "a fatal GPU timeout", ResetGpu),
    e(160, "CHANNEL_RETIREMENT_EVENT", "a channel was retired", RebootNode),
];

pub fn lookup(xid: u32) -> Option<&'static Entry> {
    CATALOGUE.binary_search_by_key(&xid, |e| e.xid).ok().map(|at| &CATALOGUE[at])
}

/// How an Xid is shown: the catalogue's entry, or what is known of one
/// it does not list.
pub fn describe(xid: u32) -> (Option<&'static str>, Option<&'static str>, XidAction) {
    match lookup(xid) {
        Some(e) => (Some(e.mnemonic), Some(e.meaning), e.action),
        None if xid == UNKNOWN_XID => (None, Some("an Xid the driver could not identify"), XidAction::Unknown),
        None => (None, None, XidAction::Unknown),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_is_sorted_and_each_xid_listed_once() {
        assert!(CATALOGUE.windows(2).all(|w| w[0].xid < w[1].xid));
    }

    #[test]
    fn the_xids_operators_ask_about_are_there_with_the_catalogues_action() {
        let action = |xid| lookup(xid).map(|e| e.action);
        for xid in [13, 31, 43] {
            assert_eq!(action(xid), Some(RestartApp), "Xid {xid}: an application fault");
            assert_eq!(severity(lookup(xid).unwrap().action), Severity::Warning);
        }
        for xid in [48, 64, 95, 119, 120, 140, 143] {
            assert_eq!(action(xid), Some(ResetGpu), "Xid {xid}");
            assert_eq!(severity(lookup(xid).unwrap().action), Severity::Critical);
        }
        assert_eq!(action(79), Some(RebootNode));
        assert_eq!(action(63), Some(Nothing), "a successful remapping needs nothing now");
        assert_eq!(action(94), Some(RestartApp), "contained: only its applications");
        for xid in [45, 74, 144, 145, 146, 147, 148, 149, 150] {
            assert_eq!(action(xid), Some(FollowWorkflow), "Xid {xid}");
        }
        assert_eq!(action(92), Some(Nothing));
        assert_eq!(action(121), Some(Nothing));
    }

    #[test]
    fn an_xid_the_catalogue_lacks_keeps_its_number_and_asks_to_look_it_up() {
        assert_eq!(describe(4242), (None, None, XidAction::Unknown));
        assert_eq!(describe(UNKNOWN_XID).2, XidAction::Unknown);
        assert!(describe(UNKNOWN_XID).1.is_some());
        assert_eq!(severity(XidAction::Unknown), Severity::Warning);
    }
}
