//! `gpuscope replay FILE --json`: the recording back as NDJSON, with alerts
//! recomputed under the current thresholds.

use std::io::{self, Write};

use super::Recording;
use crate::analysis::Analyzer;
use crate::sinks::json;

/// Returns how many lines could not be read as snapshots.
pub fn print(rec: &Recording, mut analyzer: Analyzer, out: &mut impl Write) -> io::Result<u64> {
    let mut unreadable = 0;
    for i in 0..rec.len() {
        let Ok(mut snap) = rec.get(i) else {
            unreadable += 1;
            continue;
        };
        snap.alerts.clear();
        snap.events.clear();
        analyzer.observe(&mut snap);
        json::write_line(&snap, out)?;
    }
    Ok(unreadable)
}
