//! What to do about what the detail view shows: the alerts' own hints
//! first, then what the figures themselves suggest.

use crate::model::{Alert, AlertKind, DeviceAllocator, ProbeState, Process, Snapshot};
use crate::tui::history::RowKey;
use crate::units::bytes;

const GIB: u64 = 1 << 30;

pub fn for_process(snap: &Snapshot, p: &Process, device: Option<&DeviceAllocator>, key: RowKey) -> Vec<String> {
    let alerts: Vec<&Alert> =
        snap.alerts.iter().filter(|a| a.pid == Some(p.pid) && a.gpu.is_none_or(|g| g == key.gpu)).collect();
    let alerted = |kind: AlertKind| alerts.iter().any(|a| a.kind == kind);
    let mut hints: Vec<String> = alerts.iter().map(|a| format!("{}: {}", a.message, a.hint)).collect();
    let Some(alloc) = &p.allocator else {
        hints.push("no allocator figures: run it as `gpuscope run -- CMD`, or call gpuscope_probe.start()".into());
        return hints;
    };
    match alloc.state {
        ProbeState::Fresh => {}
        ProbeState::Stale => hints.push("the probe has gone quiet: these figures may be old".into()),
        ProbeState::Gone => hints.push("the process has exited: these are its last figures".into()),
    }
    let Some(d) = device else { return hints };
    // What an alert already said is not said twice.
    if d.alloc_retries.is_some_and(|r| r > 0) && !alerted(AlertKind::AllocRetry) {
        hints.push(
            "allocation retries: cudaMalloc failed and the cache was flushed, an OOM is close; \
             lower the batch size or free memory"
                .into(),
        );
    }
    if let Some(f) = d.fragmentation.filter(|f| *f >= 0.3 && !alerted(AlertKind::Fragmentation)) {
        hints.push(format!("fragmentation {:.0}%: try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", f * 100.0));
    }
    if let (Some(cached), Some(reserved)) = (d.cached, d.reserved)
        && cached >= GIB
        && cached * 4 >= reserved
    {
        hints.push(format!(
            "{} cached: free inside the allocator for this process only; torch.cuda.empty_cache() hands it back",
            bytes(cached)
        ));
    }
    hints
}
