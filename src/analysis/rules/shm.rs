//! A probed job's `/dev/shm`: DataLoader workers put every batch in flight
//! there (`default_collate` allocates it in shared memory inside a worker,
//! torch/utils/data/_utils/collate.py), and a full one kills them with a
//! bus error, or, from PyTorch releases that reserve the space up front,
//! fails the batch with "No space left on device". Docker and Kubernetes
//! give a container 64 MiB unless told otherwise. Raised before it fills,
//! and critical once workers died of it.

use super::{Inputs, Verdicts, key};
use crate::analysis::engine::{Raise, Verdict};
use crate::analysis::input_cause;
use crate::model::{AlertKind, LoaderFailureKind, Severity};

pub fn judge(i: &Inputs<'_>, v: &mut Verdicts) {
    let c = &i.config.shm_full;
    for p in &i.snap.processes {
        let Some(input) = p.input.as_deref() else { continue };
        let Some(gpu) = p.gpus.first().map(|g| g.index) else { continue };
        let k = key(AlertKind::ShmFull, gpu, Some(p.pid));
        let share = input.shm.as_ref().and_then(|s| s.used_share());
        let died = input.failures.iter().rev().find(|f| died_of_shm(f.kind, share, c.used_share));
        let filling = input_cause::shared_memory(p, c.used_share);
        let verdict = if let Some(f) = died {
            Verdict::Raise(Raise {
                severity: Severity::Critical,
                value: share.map(|s| s * 100.0),
                threshold: Some(c.used_share * 100.0),
                message: format!(
                    "PID {}: DataLoader workers died of a full /dev/shm: {}",
                    p.pid,
                    f.message.as_deref().unwrap_or("(no message)")
                ),
                hint: input_cause::SHM_FIX.into(),
            })
        } else if let Some(why) = filling {
            Verdict::Raise(Raise {
                severity: Severity::Warning,
                value: share.map(|s| s * 100.0),
                threshold: Some(c.used_share * 100.0),
                message: format!("PID {}: {}: the DataLoader workers die when it fills", p.pid, why.evidence),
                hint: why.fix,
            })
        // Not filling: neither at `used_share` nor short of what is in flight.
        } else if share.is_some_and(|s| s < c.clear_share) {
            Verdict::Clear
        } else {
            Verdict::Hold
        };
        v.insert(k, verdict);
    }
}

/// The failure is shared memory's: said so by its kind, or a worker that
/// "exited unexpectedly" while `/dev/shm` was nearly full (PyTorch's own
/// watchdog often reports a SIGBUS death that way first).
fn died_of_shm(kind: LoaderFailureKind, share: Option<f64>, full: f64) -> bool {
    kind.is_shm() || (kind == LoaderFailureKind::WorkerExited && share.is_some_and(|s| s >= full))
}
