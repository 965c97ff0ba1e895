use serde::{Deserialize, Serialize};

use crate::model::{SCHEMA_VERSION, Timestamp};

pub const FORMAT: &str = "gpuscope-recording";

/// The first line of a recording: what wrote it, where and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub format: String,
    pub schema_version: u32,
    pub gpuscope_version: String,
    pub host: Option<String>,
    #[serde(flatten, with = "start")]
    pub start: Timestamp,
    pub interval_ms: u64,
}

impl Header {
    pub fn new(host: Option<String>, interval_ms: u64) -> Self {
        Self {
            format: FORMAT.into(),
            schema_version: SCHEMA_VERSION,
            gpuscope_version: env!("CARGO_PKG_VERSION").into(),
            host,
            start: Timestamp::now(),
            interval_ms,
        }
    }
}

crate::model::timestamp_fields!(start, "start", "start_unix_ms");
