//! How the dashboard draws and what it may do, decided once at start-up
//! from the flags and the environment, and the clock it reads "now" from.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::recording::player::Handle;
use crate::settings::Settings;

#[derive(Debug, Clone)]
pub struct TuiOptions {
    /// ASCII drawing only: `--ascii`, or a locale that is not UTF-8.
    pub ascii: bool,
    /// Colours allowed: neither `--no-color` nor a non-empty `NO_COLOR`.
    pub color: bool,
    /// `--read-only`: no signals to processes.
    pub read_only: bool,
    /// The poller's interval at start-up.
    pub interval: Duration,
    pub clock: Clock,
    /// Replaying a recording: its player's commands and status.
    pub replay: Option<Handle>,
    /// Drawing on this process's terminal (not a test backend): Ctrl-Z
    /// and SIGTSTP hand it back to the shell, SIGCONT takes it again.
    pub real_terminal: bool,
    /// Clicks and the wheel (not `--no-mouse`): the terminal's own text
    /// selection then needs Shift in most terminals.
    pub mouse: bool,
    /// Where this user's probes answer requests (the segment map, `M`).
    pub probe_dir: PathBuf,
    /// Said in the header for the whole session: why the GPUs are
    /// simulated under `--demo=auto`.
    pub notice: Option<String>,
    /// `-u` / `-p`.
    pub only: crate::settings::ProcessFilter,
    /// The analyzer's history store, which the charts then read; `None`:
    /// the dashboard records what it receives into a store of its own.
    pub history: Option<crate::history::Shared>,
    /// How far back the charts reach: `[history] window`.
    pub span: Duration,
}

impl TuiOptions {
    /// A dashboard drawn into a buffer, not a terminal (benchmarks and
    /// tests): Unicode and colour, a 1 s interval, no probe directory, no
    /// replay, the charts reaching back ten minutes, time from `clock`.
    pub fn offscreen(clock: Clock) -> Self {
        Self {
            ascii: false,
            color: true,
            read_only: false,
            interval: Duration::from_secs(1),
            clock,
            replay: None,
            real_terminal: false,
            mouse: false,
            probe_dir: "/nonexistent/gpuscope-probes".into(),
            notice: None,
            only: crate::settings::ProcessFilter::default(),
            history: None,
            span: Duration::from_secs(600),
        }
    }

    pub fn from_env(settings: &Settings) -> Self {
        let var = |name: &str| std::env::var(name).ok();
        let flags = settings.dashboard;
        Self {
            ascii: flags.ascii || !utf8_locale(var("LC_ALL"), var("LC_CTYPE"), var("LANG")),
            color: color_allowed(flags.no_color, var("NO_COLOR")),
            read_only: flags.read_only,
            interval: settings.interval,
            clock: Clock::System,
            replay: None,
            real_terminal: false,
            mouse: !flags.no_mouse,
            probe_dir: crate::probe::files::default_dir(),
            notice: None,
            only: settings.only.clone(),
            history: None,
            span: settings.history.window,
        }
    }
}

/// The locale in force is the first of LC_ALL, LC_CTYPE, LANG that is set
/// and not empty; without any, it is "C", which is not UTF-8.
pub fn utf8_locale(lc_all: Option<String>, lc_ctype: Option<String>, lang: Option<String>) -> bool {
    [lc_all, lc_ctype, lang].into_iter().flatten().find(|v| !v.is_empty()).is_some_and(|v| {
        let v = v.to_ascii_lowercase();
        v.contains("utf-8") || v.contains("utf8")
    })
}

/// <https://no-color.org>: any non-empty value turns colour off.
pub fn color_allowed(no_color_flag: bool, no_color_env: Option<String>) -> bool {
    !no_color_flag && no_color_env.is_none_or(|v| v.is_empty())
}

/// Where "now" comes from: the system, or a hand-set instant so that a
/// rendered frame (clock, data age) is the same on every run.
#[derive(Debug, Clone)]
pub enum Clock {
    System,
    Manual(Arc<AtomicU64>),
}

impl Clock {
    pub fn manual(unix_ms: u64) -> Self {
        Self::Manual(Arc::new(AtomicU64::new(unix_ms)))
    }

    pub fn set(&self, unix_ms: u64) {
        if let Self::Manual(t) = self {
            t.store(unix_ms, Ordering::Relaxed);
        }
    }

    pub fn now_ms(&self) -> u64 {
        match self {
            Self::System => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            Self::Manual(t) => t.load(Ordering::Relaxed),
        }
    }

    /// Seconds east of UTC at that instant: the local zone for the system
    /// clock, UTC for a manual one.
    pub fn utc_offset_s(&self, unix_ms: u64) -> i64 {
        match self {
            Self::System => local_offset_s(unix_ms),
            Self::Manual(_) => 0,
        }
    }

    /// "HH:MM:SS" on this clock's wall.
    pub fn wall(&self, unix_ms: u64) -> String {
        let secs = i64::try_from(unix_ms / 1000).unwrap_or(i64::MAX).saturating_add(self.utc_offset_s(unix_ms));
        let day = secs.rem_euclid(86_400);
        format!("{:02}:{:02}:{:02}", day / 3600, day % 3600 / 60, day % 60)
    }
}

fn local_offset_s(unix_ms: u64) -> i64 {
    let Ok(t) = libc::time_t::try_from(unix_ms / 1000) else { return 0 };
    // SAFETY: `tm` is plain old data that localtime_r fills in; both
    // pointers are valid for the call, and localtime_r is thread-safe.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() { 0 } else { tm.tm_gmtoff }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Option<String> {
        Some(v.to_string())
    }

    #[test]
    fn locale_precedence() {
        assert!(utf8_locale(None, None, s("en_US.UTF-8")));
        assert!(utf8_locale(None, s("C.utf8"), s("C")));
        assert!(!utf8_locale(s("C"), s("en_US.UTF-8"), s("en_US.UTF-8")), "LC_ALL wins");
        assert!(utf8_locale(s(""), None, s("de_DE.utf-8")), "empty values are skipped");
        assert!(!utf8_locale(None, None, None), "no locale is C");
        assert!(!utf8_locale(None, None, s("POSIX")));
    }

    #[test]
    fn no_color() {
        assert!(color_allowed(false, None));
        assert!(color_allowed(false, s("")));
        assert!(!color_allowed(false, s("1")));
        assert!(!color_allowed(true, None));
    }

    #[test]
    fn manual_wall_clock_is_utc() {
        let clock = Clock::manual(1_795_289_400_123);
        assert_eq!(clock.wall(clock.now_ms()), "19:30:00");
        clock.set(1_795_289_400_123 + 61_000);
        assert_eq!(clock.wall(clock.now_ms()), "19:31:01");
    }
}
