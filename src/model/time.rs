use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A wall-clock instant in both forms users ask for: RFC 3339 for people and
/// log tools, unix milliseconds for arithmetic. The text is shared: a
/// process's start time is copied into every tick's snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timestamp {
    pub time: Arc<str>,
    pub time_unix_ms: u64,
}

/// RFC 3339 ends with the year 9999 (humantime panics past it): a later
/// time (a crafted file, a clock gone mad) is shown as that.
const LAST_RFC3339_SECS: u64 = 253_402_300_799;

impl Timestamp {
    pub fn from_system(t: SystemTime) -> Self {
        let since = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).min(Duration::from_secs(LAST_RFC3339_SECS));
        Self {
            time: humantime::format_rfc3339_millis(UNIX_EPOCH + since).to_string().into(),
            time_unix_ms: u64::try_from(since.as_millis()).unwrap_or(u64::MAX),
        }
    }

    pub fn now() -> Self {
        Self::from_system(SystemTime::now())
    }

    pub fn from_unix_secs(secs: u64) -> Self {
        Self::from_system(UNIX_EPOCH + Duration::from_secs(secs.min(LAST_RFC3339_SECS)))
    }
}

/// Serde for a `Timestamp` written as a named pair of fields beside other
/// fields (`since` and `since_unix_ms`, say), the way the snapshot's own
/// `time` and `time_unix_ms` are: use with `#[serde(flatten, with = "...")]`.
/// The `optional` form is for an `Option<Timestamp>`, both fields `null`
/// when it is `None`.
macro_rules! timestamp_fields {
    ($module:ident, $time:literal, $ms:literal) => {
        mod $module {
            use serde::{Deserialize, Deserializer, Serialize, Serializer};

            use $crate::model::Timestamp;

            #[derive(Serialize, Deserialize)]
            struct Fields {
                #[serde(rename = $time)]
                time: std::sync::Arc<str>,
                #[serde(rename = $ms)]
                time_unix_ms: u64,
            }

            pub fn serialize<S: Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
                Fields { time: t.time.clone(), time_unix_ms: t.time_unix_ms }.serialize(s)
            }

            pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
                let f = Fields::deserialize(d)?;
                Ok(Timestamp { time: f.time, time_unix_ms: f.time_unix_ms })
            }
        }
    };
    (optional $module:ident, $time:literal, $ms:literal) => {
        mod $module {
            use serde::{Deserialize, Deserializer, Serialize, Serializer};

            use $crate::model::Timestamp;

            #[derive(Serialize, Deserialize)]
            struct Fields {
                #[serde(rename = $time)]
                time: Option<std::sync::Arc<str>>,
                #[serde(rename = $ms)]
                time_unix_ms: Option<u64>,
            }

            pub fn serialize<S: Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
                Fields { time: t.as_ref().map(|t| t.time.clone()), time_unix_ms: t.as_ref().map(|t| t.time_unix_ms) }
                    .serialize(s)
            }

            pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
                let f = Fields::deserialize(d)?;
                Ok(f.time.zip(f.time_unix_ms).map(|(time, time_unix_ms)| Timestamp { time, time_unix_ms }))
            }
        }
    };
}
pub(crate) use timestamp_fields;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_agree() {
        let t = Timestamp::from_system(UNIX_EPOCH + Duration::from_millis(1_700_000_000_123));
        assert_eq!(&*t.time, "2023-11-14T22:13:20.123Z");
        assert_eq!(t.time_unix_ms, 1_700_000_000_123);
    }

    #[test]
    fn times_past_the_year_9999_do_not_panic() {
        assert_eq!(&*Timestamp::from_unix_secs(u64::MAX).time, "9999-12-31T23:59:59.000Z");
        let far = UNIX_EPOCH + Duration::from_secs(1 << 50);
        assert_eq!(&*Timestamp::from_system(far).time, "9999-12-31T23:59:59.000Z");
    }
}
