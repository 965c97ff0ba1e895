//! The TOML configuration file. Strict: an unknown key or a wrong type is an
//! error that names the key, the file and the line, never silently ignored.
//! `config.example.toml` documents every key and must parse to `default()`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::analysis::config::{AlertsConfig, HistoryConfig, Refusal};
use crate::analysis::resolve_program;
use crate::util::bounds;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Time between snapshots.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// GPUs to watch: indices or UUID prefixes. Empty means all.
    pub gpus: Vec<String>,
    /// The NVML library to load instead of `libnvidia-ml.so.1`.
    pub nvml_lib: Option<PathBuf>,
    pub history: HistoryConfig,
    pub alerts: AlertsConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(1),
            gpus: Vec::new(),
            nvml_lib: None,
            history: HistoryConfig::default(),
            alerts: AlertsConfig::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// A refusal of a well-formed setting, led by the line of the first of its
/// keys the file sets ("line 4: [alerts.starved] max_utilization = 500: ...")
/// as toml's own errors are; without a line where the file sets none of them.
fn with_line(text: &str, refusal: &Refusal) -> String {
    let line = refusal.keys.iter().find_map(|key| key_line(text, key));
    match line {
        Some(n) => format!("line {n}: {refusal}"),
        None => refusal.to_string(),
    }
}

/// The line (from 1) where `text` sets the dotted `key`.
fn key_line(text: &str, key: &str) -> Option<usize> {
    let doc = toml::de::DeTable::parse(text).ok()?;
    let mut table = doc.get_ref();
    let mut parts = key.split('.').peekable();
    while let Some(part) = parts.next() {
        let (k, v) = table.iter().find(|(k, _)| k.get_ref().as_ref() == part)?;
        if parts.peek().is_none() {
            let start = k.span().start;
            return Some(text.get(..start)?.matches('\n').count() + 1);
        }
        match v.get_ref() {
            toml::de::DeValue::Table(t) => table = t,
            _ => return None,
        }
    }
    None
}

/// Where the config lives when `--config` is not given:
/// `$XDG_CONFIG_HOME/gpuscope/config.toml` (usually `~/.config/...`).
pub fn default_path() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("gpuscope").join("config.toml"))
}

impl Config {
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid { path: path.to_path_buf(), message };
        // toml's message already carries the line, the column, a caret under
        // the offending key and the key's name.
        let config: Self = toml::from_str(text).map_err(|e| invalid(e.to_string().trim_end().to_string()))?;
        bounds::INTERVAL.check(config.interval).map_err(|e| {
            invalid(format!("interval = {:?} {e}", humantime::format_duration(config.interval).to_string()))
        })?;
        let refusal = config.history.validate().and_then(|()| config.alerts.validate());
        refusal.map_err(|r| invalid(with_line(text, &r)))?;
        // Checked now: a hook that cannot run would otherwise fail
        // silently, at the first alert.
        if let Some(program) = config.alerts.exec.first() {
            resolve_program(program).map_err(|why| invalid(format!("alerts.exec: {why}")))?;
        }
        Ok(config)
    }

    /// Reads `explicit` (which must exist), else the default path if there
    /// is a file there, else the built-in defaults.
    pub fn load(explicit: Option<&Path>) -> Result<Self, ConfigError> {
        let (path, required) = match explicit {
            Some(p) => (p.to_path_buf(), true),
            None => match default_path() {
                Some(p) => (p, false),
                None => return Ok(Self::default()),
            },
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse(&text, &path),
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(source) => Err(ConfigError::Read { path, source }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("/etc/gpuscope.toml"))
    }

    #[test]
    fn example_file_is_the_defaults() {
        let text = include_str!("../config.example.toml");
        assert_eq!(parse(text).unwrap(), Config::default());
    }

    /// Every key of every table appears in the example, in its table,
    /// set or commented out.
    #[test]
    fn example_file_documents_every_key() {
        fn walk(table: &toml::Table, path: &str, text: &str) {
            let section = match path {
                "" => text.split("\n[").next().map(str::to_string),
                p => text.split(&format!("\n[{p}]\n")).nth(1).map(|s| s.split("\n[").next().unwrap_or("").to_string()),
            };
            let section = section.unwrap_or_else(|| panic!("no [{path}] section"));
            for (key, value) in table {
                match value {
                    toml::Value::Table(t) => {
                        walk(t, &if path.is_empty() { key.clone() } else { format!("{path}.{key}") }, text)
                    }
                    _ => assert!(
                        section.lines().any(|l| l.trim_start_matches("# ").starts_with(&format!("{key} ="))),
                        "{path}.{key} is not documented"
                    ),
                }
            }
        }
        let text = include_str!("../config.example.toml");
        let full = Config { nvml_lib: Some("x".into()), ..Config::default() };
        let table: toml::Table = toml::to_string(&full).unwrap().parse().unwrap();
        walk(&table, "", text);
    }

    #[test]
    fn contradictory_thresholds_and_missing_programs_are_refused() {
        let msg = parse("[alerts.fragmentation]\nenter = 0.1\nexit = 0.2\n").unwrap_err().to_string();
        assert!(msg.contains("alerts.fragmentation"), "{msg}");
        for (table, pair) in [
            ("alerts.sm_idle", "max_sm_active = 40.0\nclear_sm_active = 30.0"),
            ("alerts.sm_idle", "min_utilization = 60.0"),
            ("alerts.tensor_idle", "clear_tensor_active = 0.5"),
            ("alerts.tensor_idle", "min_sm_active = 30.0"),
        ] {
            let msg = parse(&format!("[{table}]\n{pair}\n")).unwrap_err().to_string();
            assert!(msg.contains(&format!("[{table}] need")), "{pair}: {msg}");
        }
        let msg = parse("[alerts]\nexec = [\"/nonexistent/notify\"]\n").unwrap_err().to_string();
        assert!(msg.contains("/nonexistent/notify"), "{msg}");
        let dir = tempfile::tempdir().unwrap();
        let hook = dir.path().join("page-me");
        std::fs::write(&hook, "#!/bin/sh\n").unwrap();
        let msg = parse(&format!("[alerts]\nexec = [{:?}]\n", hook.display().to_string())).unwrap_err().to_string();
        assert!(msg.contains("alerts.exec") && msg.contains("page-me") && msg.contains("not executable"), "{msg}");
        let msg = parse("[alerts.leak]\nwindow = \"5m\"\nslope = 3\n").unwrap_err().to_string();
        assert!(msg.contains("slope") && msg.contains("line 3"), "{msg}");
    }

    #[test]
    fn values_are_read() {
        let c = parse("interval = \"250ms\"\ngpus = [\"0\", \"GPU-5ea1\"]\nnvml_lib = \"/opt/nvml.so\"").unwrap();
        assert_eq!(c.interval, Duration::from_millis(250));
        assert_eq!(c.gpus, ["0", "GPU-5ea1"]);
        assert_eq!(c.nvml_lib.as_deref(), Some(Path::new("/opt/nvml.so")));
    }

    #[test]
    fn unknown_key_names_key_file_and_line() {
        let msg = parse("interval = \"1s\"\ncolour = true\n").unwrap_err().to_string();
        assert!(msg.contains("/etc/gpuscope.toml"), "{msg}");
        assert!(msg.contains("colour"), "{msg}");
        assert!(msg.contains("line 2"), "{msg}");
    }

    #[test]
    fn wrong_type_names_key_and_line() {
        let msg = parse("\n\ninterval = 5\n").unwrap_err().to_string();
        assert!(msg.contains("line 3"), "{msg}");
        assert!(msg.contains("interval"), "{msg}");
    }

    #[test]
    fn too_short_interval_is_refused() {
        let msg = parse("interval = \"1ms\"").unwrap_err().to_string();
        assert!(msg.contains("at least 10ms"), "{msg}");
    }

    #[test]
    fn absurd_durations_are_refused() {
        let msg = parse("interval = \"9223372036854775807s\"").unwrap_err().to_string();
        assert!(msg.contains("interval") && msg.contains("at most 1day"), "{msg}");
        let msg = parse("[history]\nwindow = \"500000000y\"").unwrap_err().to_string();
        assert!(msg.contains("[history] window") && msg.contains("at most 30days"), "{msg}");
        for (table, key) in [
            ("alerts", "exec_min_interval"),
            ("alerts.fragmentation", "window"),
            ("alerts.alloc_retry", "hold"),
            ("alerts.leak", "window"),
            ("alerts.memory_pressure", "duration"),
            ("alerts.starved", "window"),
            ("alerts.sm_idle", "window"),
            ("alerts.tensor_idle", "window"),
        ] {
            let msg = parse(&format!("[{table}]\n{key} = \"400days\"")).unwrap_err().to_string();
            assert!(msg.contains(&format!("[{table}] {key} = ")) && msg.contains("at most 30days"), "{msg}");
            assert!(msg.contains("line 2: "), "{msg}");
        }
    }

    #[test]
    fn thresholds_out_of_range_are_refused_with_key_value_and_range() {
        for (text, expect) in [
            (
                "[alerts.memory_pressure]\nwarn_free_percent = 150\ncritical_free_percent = 120\nclear_free_percent = 200\n",
                "line 2: [alerts.memory_pressure] warn_free_percent = 150: must be a percentage from 0 to 100",
            ),
            (
                "[alerts.starved]\nmax_utilization = 500\n",
                "line 2: [alerts.starved] max_utilization = 500: must be a percentage from 0 to 100",
            ),
            (
                "\n[alerts.sm_idle]\nmin_utilization = -10\n",
                "line 3: [alerts.sm_idle] min_utilization = -10: must be a percentage from 0 to 100",
            ),
            (
                "[alerts.sm_idle]\nmin_utilization = nan\n",
                "[alerts.sm_idle] min_utilization = NaN: must be a percentage",
            ),
            ("[alerts.tensor_idle]\nmax_tensor_active = inf\n", "max_tensor_active = inf: must be a percentage"),
            (
                "[alerts.starved]\nmin_data_wait = 20.0\n",
                "[alerts.starved] min_data_wait = 20: must be a share from 0 to 1",
            ),
            (
                "[alerts.shm_full]\nused_share = -0.5\n",
                "[alerts.shm_full] used_share = -0.5: must be a share from 0 to 1",
            ),
            ("[alerts.leak]\nmin_r2 = 1.5\n", "[alerts.leak] min_r2 = 1.5: must be a share from 0 to 1"),
            (
                "[alerts.fragmentation]\nenter = nan\n",
                "[alerts.fragmentation] enter = NaN: must be a share from 0 to 1",
            ),
            // Dotted keys at the top level point at their own line too.
            (
                "interval = \"1s\"\nalerts.starved.clear_utilization = 101\n",
                "line 2: [alerts.starved] clear_utilization = 101",
            ),
            (
                "[alerts.leak]\nmin_growth_mib = 18446744073709551615\n",
                "[alerts.leak] min_growth_mib = 18446744073709551615: must be from 0 to 16777216 (MiB, 16 TiB)",
            ),
        ] {
            let msg = parse(text).unwrap_err().to_string();
            assert!(msg.starts_with("config file /etc/gpuscope.toml: "), "{msg}");
            assert!(msg.contains(expect), "{text:?}: {msg}");
        }
        // The extremes themselves are fine.
        parse("[alerts.sm_idle]\nmin_utilization = 100\nclear_utilization = 0\nmax_sm_active = 0\n").unwrap();
    }

    #[test]
    fn misordered_thresholds_are_refused_with_their_values() {
        let msg = parse("[alerts.memory_pressure]\nwarn_free_percent = 1.0\n").unwrap_err().to_string();
        assert!(
            msg.contains(
                "line 2: [alerts.memory_pressure] need critical_free_percent (2) <= warn_free_percent (1) \
                 <= clear_free_percent (6)"
            ),
            "{msg}"
        );
        let msg = parse("[alerts.fragmentation]\nenter = 0.1\nexit = 0.2\n").unwrap_err().to_string();
        assert!(msg.contains("line 3: [alerts.fragmentation] need exit (0.2) <= enter (0.1)"), "{msg}");
        let msg = parse("[alerts.starved]\nmax_utilization = 50\n").unwrap_err().to_string();
        assert!(msg.contains("[alerts.starved] need max_utilization (50) <= clear_utilization (40)"), "{msg}");
    }

    #[test]
    fn the_history_window_must_be_at_least_a_minute() {
        let msg = parse("[history]\nwindow = \"0s\"\n").unwrap_err().to_string();
        assert!(msg.contains("line 2: [history] window = \"0s\": must be at least 1m"), "{msg}");
        assert_eq!(parse("[history]\nwindow = \"1m\"\n").unwrap().history.window, Duration::from_secs(60));
    }

    #[test]
    fn missing_explicit_file_is_an_error() {
        let err = Config::load(Some(Path::new("/nonexistent/gpuscope.toml"))).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/gpuscope.toml"), "{err}");
    }
}
