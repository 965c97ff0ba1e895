//! What to do about what the detail view shows: the alerts' own hints
//! first, then what the figures themselves suggest.

use crate::model::{Alert, AlertKind, DeviceAllocator, ProbeState, Process, ProcessAllocator, Snapshot};
use crate::tui::rows::RowKey;
use crate::util::units::{GIB, bytes};

/// `said`: alert kinds the view already explains elsewhere (where the
/// time goes names the `starved` cause and its fix).
pub fn for_process(
    snap: &Snapshot,
    p: &Process,
    device: Option<&DeviceAllocator>,
    key: RowKey,
    said: &[AlertKind],
) -> Vec<String> {
    let alerts: Vec<&Alert> = snap
        .alerts
        .iter()
        .filter(|a| a.pid == Some(p.pid) && a.gpu.is_none_or(|g| g == key.gpu))
        .filter(|a| !said.contains(&a.kind))
        .collect();
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
        hints.push(match &*alloc.framework {
            "jax" => format!(
                "fragmentation {:.0}%: XLA's free memory is in small pieces; a larger allocation may fail \
                 though enough is free",
                f * 100.0
            ),
            _ => format!("fragmentation {:.0}%: try {}=expandable_segments:True", f * 100.0, alloc.conf_var()),
        });
    }
    if let (Some(cached), Some(reserved)) = (d.cached, d.reserved)
        && cached >= GIB
        && cached * 4 >= reserved
        && &*alloc.framework == "torch"
    {
        hints.push(cached_hint(alloc, d, cached));
    }
    hints
}

/// How much of the cache `empty_cache()` could really hand back, and why
/// the rest stays.
pub fn cached_hint(alloc: &ProcessAllocator, d: &DeviceAllocator, cached: u64) -> String {
    let head = format!("{} cached: free inside the allocator for this process only", bytes(cached));
    let Some(releasable) = d.releasable else {
        return format!(
            "{head}; how much torch.cuda.empty_cache() could return is unknown: it cannot return the free \
             space inside partly used segments, and this probe does not report that"
        );
    };
    // What stays, and notes on what was assumed.
    let mut stays = Vec::new();
    match d.inactive_split {
        _ if alloc.backend.as_deref() == Some("cudaMallocAsync") => {
            stays.push("cudaMallocAsync does not count inactive split; taken as 0".to_string());
        }
        _ if alloc.expandable_segments == Some(true) => {
            stays.push("expandable segments release free pages inside segments; nothing trapped".to_string());
        }
        Some(split) if split > 0 => stays.push(format!("{} is free space inside partly used segments", bytes(split))),
        _ => {}
    }
    let bound = match d.private_pools {
        Some(pools) if pools > 0 => {
            stays.push(format!("{} is held by private pools such as CUDA graphs", bytes(pools)));
            ""
        }
        Some(_) => "",
        None => {
            stays.push("private pools such as CUDA graphs, which this PyTorch does not report, stay too".into());
            "at most "
        }
    };
    let why = if stays.is_empty() { String::new() } else { format!(" ({})", stays.join("; ")) };
    format!("{head}; torch.cuda.empty_cache() could return {bound}{}{why}", bytes(releasable))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc(backend: &str, expandable: bool) -> ProcessAllocator {
        serde_json::from_value(serde_json::json!({
            "framework": "torch", "backend": backend, "expandable_segments": expandable,
            "state": "fresh", "age_ms": 0, "devices": []
        }))
        .unwrap()
    }

    fn device(split: Option<u64>, pools: Option<u64>, releasable: Option<u64>) -> DeviceAllocator {
        DeviceAllocator { inactive_split: split, private_pools: pools, releasable, ..DeviceAllocator::default() }
    }

    #[test]
    fn the_cached_hint_says_what_empty_cache_could_return_and_why_the_rest_stays() {
        let h = cached_hint(&alloc("native", false), &device(Some(3 * GIB), Some(GIB), Some(2 * GIB)), 6 * GIB);
        assert!(h.contains("could return 2.0 GiB (3.0 GiB is free space inside partly used segments"), "{h}");
        assert!(h.contains("1.0 GiB is held by private pools such as CUDA graphs"), "{h}");
        let h = cached_hint(&alloc("native", false), &device(Some(3 * GIB), None, Some(3 * GIB)), 6 * GIB);
        assert!(h.contains("could return at most 3.0 GiB") && h.contains("does not report"), "{h}");
        let h = cached_hint(&alloc("native", false), &device(None, None, None), 6 * GIB);
        assert!(h.contains("how much torch.cuda.empty_cache() could return is unknown"), "{h}");
        let h = cached_hint(&alloc("cudaMallocAsync", false), &device(None, Some(0), Some(6 * GIB)), 6 * GIB);
        assert!(h.contains("could return 6.0 GiB (cudaMallocAsync does not count inactive split; taken as 0)"), "{h}");
        let h = cached_hint(&alloc("native", true), &device(Some(GIB), Some(0), Some(6 * GIB)), 6 * GIB);
        assert!(h.contains("expandable segments"), "{h}");
    }
}
