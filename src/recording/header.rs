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

/// `start` and `start_unix_ms`, as every other instant is written.
mod start {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::Timestamp;

    #[derive(Serialize, Deserialize)]
    struct Fields {
        start: String,
        start_unix_ms: u64,
    }

    pub fn serialize<S: Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        Fields { start: t.time.clone(), start_unix_ms: t.time_unix_ms }.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let f = Fields::deserialize(d)?;
        Ok(Timestamp { time: f.start, time_unix_ms: f.start_unix_ms })
    }
}
