//! The probe's file format (version 1), written by
//! `assets/gpuscope_probe.py`. Reading is strict about types and limits and
//! lenient about new fields, so a newer probe still works with this reader.

use serde::Deserialize;

use crate::sources::sanitize_command;

pub const PROBE_FORMAT: &str = "gpuscope-probe";
/// Real files are a few KiB; anything near this is not a probe's.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;
const MAX_DEVICES: usize = 64;

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ProbeFile {
    pub format: String,
    pub version: u32,
    pub pid: u32,
    pub start_ticks: u64,
    pub seq: u64,
    pub written_unix_ms: u64,
    pub interval_s: f64,
    pub errors: u64,
    pub framework: String,
    pub framework_version: Option<String>,
    pub backend: Option<String>,
    pub alloc_conf: Option<String>,
    pub alloc_conf_var: Option<String>,
    pub expandable_segments: bool,
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
    pub pinned_host: Option<PinnedHost>,
    pub devices: Vec<ProbeDevice>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PinnedHost {
    pub current: Option<u64>,
    pub peak: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ProbeDevice {
    pub index: u32,
    pub uuid: Option<String>,
    pub allocated: Option<u64>,
    pub allocated_peak: Option<u64>,
    pub reserved: Option<u64>,
    pub reserved_peak: Option<u64>,
    pub active: Option<u64>,
    pub active_peak: Option<u64>,
    pub inactive_split: Option<u64>,
    pub inactive_split_peak: Option<u64>,
    pub requested: Option<u64>,
    pub requested_peak: Option<u64>,
    pub segments: Option<u64>,
    pub alloc_retries: Option<u64>,
    pub ooms: Option<u64>,
    pub device_allocs: Option<u64>,
    pub device_frees: Option<u64>,
    pub largest_free_block: Option<u64>,
    pub bytes_limit: Option<u64>,
}

impl ProbeFile {
    /// Parses and checks a file named `<pid>-<start_ticks>.json`.
    pub fn parse(text: &str, pid: u32, start_ticks: u64) -> Result<Self, String> {
        let mut f: Self = serde_json::from_str(text).map_err(|e| format!("not a probe file: {e}"))?;
        if f.format != PROBE_FORMAT || f.version != 1 {
            return Err(format!("unknown format {:?} version {}", f.format, f.version));
        }
        if (f.pid, f.start_ticks) != (pid, start_ticks) {
            return Err(format!("names process {}-{} but says {}-{}", pid, start_ticks, f.pid, f.start_ticks));
        }
        if !matches!(f.framework.as_str(), "torch" | "jax") {
            return Err(format!("unknown framework {:?}", f.framework));
        }
        // The probe clamps it to 0.1..60 s; anything past an hour is not a
        // probe's, and a huge one would overflow the freshness arithmetic.
        if !(f.interval_s > 0.0 && f.interval_s <= 3600.0) {
            return Err(format!("bad interval {}", f.interval_s));
        }
        if f.devices.len() > MAX_DEVICES {
            return Err(format!("{} devices", f.devices.len()));
        }
        // Whatever the file says ends up on a terminal: no escape sequences.
        for s in [&mut f.framework_version, &mut f.backend, &mut f.alloc_conf, &mut f.alloc_conf_var] {
            *s = s.as_deref().map(sanitize_command);
        }
        for d in &mut f.devices {
            d.uuid = d.uuid.as_deref().map(sanitize_command);
        }
        Ok(f)
    }
}

#[cfg(test)]
pub(crate) fn sample_json(pid: u32, start_ticks: u64) -> String {
    serde_json::json!({
        "format": "gpuscope-probe", "version": 1, "pid": pid, "start_ticks": start_ticks, "seq": 3,
        "written_unix_ms": 1_795_289_400_123u64, "interval_s": 1.0, "errors": 0,
        "framework": "torch", "framework_version": "2.5.1", "backend": "native",
        "alloc_conf": null, "alloc_conf_var": null, "expandable_segments": false,
        "rank": 0, "local_rank": 0, "world_size": 2, "pinned_host": {"current": 1024, "peak": 2048},
        "devices": [{"index": 0, "uuid": "GPU-aaaa", "allocated": 100, "allocated_peak": 150, "reserved": 200,
            "reserved_peak": 250, "active": 120, "active_peak": 160, "inactive_split": 30, "inactive_split_peak": 40,
            "requested": 90, "requested_peak": 140, "segments": 4, "alloc_retries": 0, "ooms": 0,
            "device_allocs": 5, "device_frees": 1, "largest_free_block": null, "bytes_limit": null}]
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_good_file_parses() {
        let f = ProbeFile::parse(&sample_json(42, 7), 42, 7).unwrap();
        assert_eq!(f.devices[0].reserved, Some(200));
        assert_eq!(f.pinned_host, Some(PinnedHost { current: Some(1024), peak: Some(2048) }));
    }

    #[test]
    fn hostile_or_broken_files_are_refused() {
        assert!(ProbeFile::parse("{\"format\": \"gpus", 42, 7).unwrap_err().contains("not a probe file"));
        assert!(ProbeFile::parse("[1,2,3]", 42, 7).is_err());
        let other = ProbeFile::parse(&sample_json(42, 7), 43, 7).unwrap_err();
        assert!(other.contains("43-7"), "{other}");
        let negative = sample_json(42, 7).replace("\"allocated\":100", "\"allocated\":-5");
        assert!(ProbeFile::parse(&negative, 42, 7).is_err());
        for interval in ["1e300", "1.7976931348623157e308", "0", "-1"] {
            let bad = sample_json(42, 7).replace("\"interval_s\":1.0", &format!("\"interval_s\":{interval}"));
            assert!(ProbeFile::parse(&bad, 42, 7).unwrap_err().contains("bad interval"), "{interval}");
        }
        let escape = sample_json(42, 7).replace("\"2.5.1\"", "\"2.5\\u001b[2J\"");
        assert_eq!(ProbeFile::parse(&escape, 42, 7).unwrap().framework_version.as_deref(), Some("2.5"));
    }
}
