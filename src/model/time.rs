use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A wall-clock instant in both forms users ask for: RFC 3339 for people and
/// log tools, unix milliseconds for arithmetic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timestamp {
    pub time: String,
    pub time_unix_ms: u64,
}

impl Timestamp {
    pub fn from_system(t: SystemTime) -> Self {
        let since = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
        Self {
            time: humantime::format_rfc3339_millis(UNIX_EPOCH + since).to_string(),
            time_unix_ms: u64::try_from(since.as_millis()).unwrap_or(u64::MAX),
        }
    }

    pub fn now() -> Self {
        Self::from_system(SystemTime::now())
    }

    pub fn from_unix_secs(secs: u64) -> Self {
        Self::from_system(UNIX_EPOCH + Duration::from_secs(secs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_agree() {
        let t = Timestamp::from_system(UNIX_EPOCH + Duration::from_millis(1_700_000_000_123));
        assert_eq!(t.time, "2023-11-14T22:13:20.123Z");
        assert_eq!(t.time_unix_ms, 1_700_000_000_123);
    }
}
