//! Bounds on every duration a user can give, checked where it is parsed
//! (flags and the config file), and time arithmetic that saturates instead
//! of panicking. A duration past its bound is refused with a message naming
//! the bound; nothing later has to cope with `u64::MAX` seconds.

use std::time::{Duration, Instant};

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// The range a duration must fall in, and what to call it in a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub min: Duration,
    pub max: Duration,
}

/// `--interval` and the config's `interval`: faster than 10 ms, collection
/// itself would dominate the machine; slower than a day is not watching.
pub const INTERVAL: Bounds = Bounds { min: Duration::from_millis(10), max: DAY };
/// `check --for`.
pub const CHECK_WINDOW: Bounds = Bounds { min: Duration::ZERO, max: DAY.saturating_mul(30) };
/// `record --duration`: at most a year (humantime's, 365.25 days).
pub const RECORD_DURATION: Bounds = Bounds { min: Duration::from_millis(1), max: Duration::from_secs(31_557_600) };
/// `--timeout`: how long a headless mode waits for the driver.
pub const TIMEOUT: Bounds = Bounds { min: Duration::from_millis(100), max: DAY };
/// Windows, holds and minimum intervals in the config file.
pub const CONFIG_SPAN: Bounds = Bounds { min: Duration::ZERO, max: DAY.saturating_mul(30) };
/// The config's `[history] window`, how far back the charts reach: at least
/// a minute (the history keeps two minutes of one-second buckets anyway, so
/// a shorter chart only hides data; a zero one draws nothing), at most
/// `CONFIG_SPAN`'s 30 days.
pub const HISTORY_WINDOW: Bounds = Bounds { min: Duration::from_secs(60), max: DAY.saturating_mul(30) };

impl Bounds {
    /// `Err` is a message without the name of the setting, which the caller
    /// knows: "must be at most 30days".
    pub fn check(&self, d: Duration) -> Result<Duration, String> {
        if d < self.min {
            return Err(format!("must be at least {}", humantime::format_duration(self.min)));
        }
        if d > self.max {
            return Err(self.too_long());
        }
        Ok(d)
    }

    fn too_long(&self) -> String {
        format!("must be at most {}", humantime::format_duration(self.max))
    }

    /// Parses a humantime duration ("500ms", "2h 30m") within the bounds.
    pub fn parse(&self, text: &str) -> Result<Duration, String> {
        // humantime's own overflow message ("number is too large") does not
        // say what the limit is; ours does.
        let d = humantime::parse_duration(text).map_err(|e| match e {
            humantime::DurationError::NumberOverflow => self.too_long(),
            other => other.to_string(),
        })?;
        self.check(d)
    }
}

/// clap value parsers, one per bounded flag.
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    INTERVAL.parse(text)
}

/// `memviz --history`: the probe records at most 10 minutes.
pub const MEMVIZ_HISTORY: Bounds = Bounds { min: Duration::from_secs(1), max: Duration::from_secs(600) };

pub fn parse_memviz_history(text: &str) -> Result<Duration, String> {
    MEMVIZ_HISTORY.parse(text)
}

pub fn parse_check_window(text: &str) -> Result<Duration, String> {
    CHECK_WINDOW.parse(text)
}

pub fn parse_record_duration(text: &str) -> Result<Duration, String> {
    RECORD_DURATION.parse(text)
}

pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    TIMEOUT.parse(text)
}

/// `from + d`, or a point so far ahead that it never comes when that would
/// not fit in an `Instant`.
pub fn later(from: Instant, d: Duration) -> Instant {
    from.checked_add(d).or_else(|| from.checked_add(DAY.saturating_mul(365 * 100))).unwrap_or(from)
}

/// Milliseconds as the snapshot and the analysis count them, saturating.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn absurd_durations_are_refused_with_the_bound() {
        assert_eq!(parse_interval("9223372036854775807s").unwrap_err(), "must be at most 1day");
        assert_eq!(parse_check_window("18446744073709551615s").unwrap_err(), "must be at most 30days");
        assert_eq!(parse_interval("99999999999999999999999s").unwrap_err(), "must be at most 1day");
        assert_eq!(parse_interval("1ms").unwrap_err(), "must be at least 10ms");
        assert_eq!(parse_timeout("10s"), Ok(Duration::from_secs(10)));
        assert!(parse_record_duration("8h").is_ok());
        assert!(parse_interval("soon").unwrap_err().contains("expected number"));
    }

    proptest! {
        /// Whatever the text, parsing gives a duration within the bounds or
        /// an error, and never panics.
        #[test]
        fn parsed_durations_are_within_bounds(n in any::<u64>(), unit in prop::sample::select(vec!["ns", "ms", "s", "m", "h", "d", "w", "y"])) {
            for bounds in [INTERVAL, CHECK_WINDOW, RECORD_DURATION, TIMEOUT, CONFIG_SPAN, HISTORY_WINDOW] {
                if let Ok(d) = bounds.parse(&format!("{n}{unit}")) {
                    prop_assert!(bounds.min <= d && d <= bounds.max);
                }
            }
        }

        #[test]
        fn later_never_panics_and_never_goes_back(secs in any::<u64>(), nanos in 0u32..1_000_000_000) {
            let now = Instant::now();
            let d = Duration::new(secs, nanos);
            let t = later(now, d);
            prop_assert!(t >= now);
            if let Some(exact) = now.checked_add(d) {
                prop_assert_eq!(t, exact);
            }
        }
    }
}
