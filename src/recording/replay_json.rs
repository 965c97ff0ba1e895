//! `gpuscope replay FILE --json`: the recording back as NDJSON, with alerts
//! recomputed under the current thresholds. Read once, front to back, so a
//! pipe or a FIFO works as well as a file.

use std::io::Write;
use std::path::Path;

use super::reader::{StreamError, Summary, stream};
use crate::analysis::Analyzer;
use crate::output::json;

pub fn print(path: &Path, mut analyzer: Analyzer, out: &mut impl Write) -> Result<Summary, StreamError> {
    stream(path, |mut snap| {
        snap.alerts.clear();
        snap.events.clear();
        analyzer.observe(&mut snap);
        json::write_line(&snap, out)
    })
}
