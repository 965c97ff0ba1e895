//! The driver reported an Xid on a GPU within `alerts.xid.window`: the
//! worst of them (the newest among equals) says what happened and what to
//! do, from NVIDIA's Xid catalogue, as the event carries it.

use super::{Inputs, Verdicts, key};
use crate::analysis::engine::{Raise, Verdict};
use crate::model::{AlertKind, DriverEventKind};

pub fn judge(i: &Inputs<'_>, v: &mut Verdicts) {
    let window_ms = super::window_ms(i.config.xid.window);
    for gpu in &i.snap.gpus {
        let recent: Vec<_> = (gpu.driver_events.iter())
            .filter(|e| e.kind == DriverEventKind::Xid && i.now_ms.saturating_sub(e.time.time_unix_ms) < window_ms)
            .collect();
        // `max_by_key` keeps the last of equals: the newest.
        let verdict = match recent.iter().max_by_key(|e| e.severity) {
            Some(worst) => {
                let number = worst.xid.map_or_else(|| "?".to_string(), |x| x.to_string());
                let what = match (&worst.meaning, &worst.mnemonic) {
                    (Some(m), Some(n)) => format!("{m} ({n})"),
                    (Some(m), None) => m.clone(),
                    (None, _) => "an Xid not in NVIDIA's Xid catalogue as gpuscope has it".into(),
                };
                let more = match recent.len() - 1 {
                    0 => String::new(),
                    n => format!("; {n} more Xid(s) within {}", humantime::format_duration(i.config.xid.window)),
                };
                let todo = worst.action.map_or("look it up in NVIDIA's Xid catalogue", |a| a.describe());
                Verdict::Raise(Raise {
                    severity: worst.severity,
                    value: worst.xid.map(f64::from),
                    threshold: None,
                    message: format!("GPU {}: Xid {number} at {}: {what}{more}", gpu.index, worst.time.time),
                    hint: format!(
                        "{}. NVIDIA's Xid catalogue: https://docs.nvidia.com/deploy/xid-errors/",
                        sentence(todo)
                    ),
                })
            }
            None => Verdict::Clear,
        };
        v.insert(key(AlertKind::Xid, gpu.index, None), verdict);
    }
}

/// `text` with its first letter upper-cased.
fn sentence(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| first.to_uppercase().chain(chars).collect())
}
