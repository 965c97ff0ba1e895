//! The probe's file format (version 1), written by
//! `assets/gpuscope_probe.py`. Reading is strict about types and limits and
//! lenient about new fields, so a newer probe still works with this reader.

use std::sync::Arc;

use serde::{Deserialize, Deserializer};

use crate::model::{FrameworkEnvironment, InputPipeline, OomPostMortem};
use crate::sources::{NAME_MAX_CHARS, bounded, sanitize_command, sanitize_shared};

pub const PROBE_FORMAT: &str = "gpuscope-probe";
/// Real files are a few KiB; anything near this is not a probe's.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;
const MAX_DEVICES: usize = 64;

/// Reads an opened regular file of `size` bytes (its metadata's) into
/// `buf`, at most `MAX_FILE_BYTES + 1` of it: in one read where the size
/// holds, where `read_to_end` takes two (`bounded_read::read_into`). A
/// file that grew is read on to its end or the limit, as `read_to_end`
/// would. A probe replaces its file by renaming a new one over it, so what
/// was opened does not change.
pub fn read_regular(file: impl std::io::Read, size: u64, buf: &mut Vec<u8>) -> std::io::Result<()> {
    let limit = usize::try_from(MAX_FILE_BYTES + 1).unwrap_or(usize::MAX);
    crate::util::bounded_read::read_into(file, buf, limit, Some(size))
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ProbeFile {
    #[serde(deserialize_with = "shared::text")]
    pub format: Arc<str>,
    pub version: u32,
    pub pid: u32,
    pub start_ticks: u64,
    /// `pid:[inode]` of the writer's PID namespace (probes since issue 11).
    #[serde(default, deserialize_with = "shared::optional")]
    pub pid_ns: Option<Arc<str>>,
    pub seq: u64,
    pub written_unix_ms: u64,
    pub interval_s: f64,
    pub errors: u64,
    #[serde(deserialize_with = "shared::text")]
    pub framework: Arc<str>,
    #[serde(default, deserialize_with = "shared::optional")]
    pub framework_version: Option<Arc<str>>,
    #[serde(default, deserialize_with = "shared::optional")]
    pub backend: Option<Arc<str>>,
    /// The allocator settings in effect (runtime accessor or environment).
    #[serde(default, deserialize_with = "shared::optional")]
    pub alloc_conf: Option<Arc<str>>,
    /// The variable the running version reads first: the one hints name.
    #[serde(default, deserialize_with = "shared::optional")]
    pub alloc_conf_var: Option<Arc<str>>,
    /// "runtime" or "environment": where `alloc_conf` came from.
    #[serde(default, deserialize_with = "shared::optional")]
    pub alloc_conf_source: Option<Arc<str>>,
    /// Both variables' raw values.
    #[serde(default)]
    pub alloc_conf_env: Option<AllocConfEnv>,
    pub expandable_segments: bool,
    /// `None` when the file does not say (a probe older than the field):
    /// then nothing can be inferred from it. `Some(None)`: unset.
    #[serde(default, deserialize_with = "present")]
    pub cuda_visible_devices: Option<Option<Arc<str>>>,
    #[serde(default, deserialize_with = "shared::optional")]
    pub cuda_device_order: Option<Arc<str>>,
    /// OutOfMemoryErrors the probe itself saw raised.
    #[serde(default)]
    pub oom_events: Option<u64>,
    #[serde(default)]
    pub last_oom: Option<Vec<OomPostMortem>>,
    /// The distributed job: torchrun's run id, or MASTER_ADDR:MASTER_PORT.
    #[serde(default, deserialize_with = "shared::optional")]
    pub job: Option<Arc<str>>,
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
    pub pinned_host: Option<PinnedHost>,
    #[serde(deserialize_with = "devices")]
    pub devices: Vec<ProbeDevice>,
    /// The input pipeline (DataLoaders, `/dev/shm`); `None` from JAX and
    /// from probes before it. Shared as is with every snapshot until the
    /// file changes.
    #[serde(default)]
    pub input: Option<Arc<InputPipeline>>,
    /// The framework's numeric environment, likewise.
    #[serde(default)]
    pub environment: Option<Arc<FrameworkEnvironment>>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct AllocConfEnv {
    #[serde(rename = "PYTORCH_ALLOC_CONF", default, deserialize_with = "shared::optional")]
    pub pytorch_alloc_conf: Option<Arc<str>>,
    #[serde(rename = "PYTORCH_CUDA_ALLOC_CONF", default, deserialize_with = "shared::optional")]
    pub pytorch_cuda_alloc_conf: Option<Arc<str>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PinnedHost {
    pub current: Option<u64>,
    pub peak: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ProbeDevice {
    /// The framework's ordinal: CUDA's among the visible devices.
    pub index: u32,
    /// "GPU-…", "MIG-…", or bare, as the framework gives it.
    #[serde(default, deserialize_with = "shared::optional")]
    pub uuid: Option<Arc<str>>,
    /// "domain:bus:device.0" in hex, where the framework gives it.
    #[serde(default, deserialize_with = "shared::optional")]
    pub pci_bus_id: Option<Arc<str>>,
    /// Bytes held by private pools (CUDA graphs), where reported.
    #[serde(default)]
    pub private_pools_reserved: Option<u64>,
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
        if &*f.format != PROBE_FORMAT || f.version != 1 {
            return Err(format!("unknown format {:?} version {}", f.format, f.version));
        }
        if (f.pid, f.start_ticks) != (pid, start_ticks) {
            return Err(format!("names process {}-{} but says {}-{}", pid, start_ticks, f.pid, f.start_ticks));
        }
        if !matches!(&*f.framework, "torch" | "jax") {
            return Err(format!("unknown framework {:?}", f.framework));
        }
        // The probe clamps it to 0.1..60 s; anything past an hour is not a
        // probe's, and a huge one would overflow the freshness arithmetic.
        if !(f.interval_s > 0.0 && f.interval_s <= 3600.0) {
            return Err(format!("bad interval {}", f.interval_s));
        }
        check_post_mortems(f.last_oom.as_deref().unwrap_or_default())?;
        // Just read, each part has no other owner yet.
        if let Some(input) = f.input.as_mut().and_then(Arc::get_mut) {
            super::input::check_input(input)?;
        }
        if let Some(env) = f.environment.as_mut().and_then(Arc::get_mut) {
            super::input::check_environment(env)?;
        }
        if f.devices.len() > MAX_DEVICES {
            return Err(format!("{} devices", f.devices.len()));
        }
        // Whatever the file says ends up on a terminal: no escape sequences.
        for s in [
            &mut f.framework_version,
            &mut f.backend,
            &mut f.alloc_conf,
            &mut f.alloc_conf_var,
            &mut f.alloc_conf_source,
            &mut f.cuda_device_order,
            &mut f.job,
            &mut f.pid_ns,
        ] {
            *s = s.take().map(sanitize_shared);
        }
        // A job key is a torchrun run id or MASTER_ADDR:MASTER_PORT; one
        // long enough to bloat every output and series that names the job
        // is cut, as the exporter cuts every label value a process supplies.
        if let Some(job) = &f.job
            && let std::borrow::Cow::Owned(cut) = bounded(job, NAME_MAX_CHARS)
        {
            f.job = Some(cut.into());
        }
        if let Some(env) = &mut f.alloc_conf_env {
            for s in [&mut env.pytorch_alloc_conf, &mut env.pytorch_cuda_alloc_conf] {
                *s = s.take().map(sanitize_shared);
            }
        }
        // Spaces are part of the value's meaning here, so only a value that
        // carries control characters is rewritten.
        if let Some(Some(v)) = &mut f.cuda_visible_devices
            && v.chars().any(char::is_control)
        {
            *v = sanitize_command(v).into();
        }
        for d in &mut f.devices {
            d.uuid = d.uuid.take().map(sanitize_shared);
            d.pci_bus_id = d.pci_bus_id.take().map(sanitize_shared);
        }
        // The reader keeps each probe's parsed file: no spare room kept
        // (`devices` starts with room for one; a second grows it to four).
        f.devices.shrink_to_fit();
        if let Some(ooms) = &mut f.last_oom {
            ooms.shrink_to_fit();
        }
        Ok(f)
    }
}

/// The texts of probe files, each kept once. The ranks of a job write the
/// same framework, version, backend, allocator settings and namespace, on
/// the same few GPUs, and each probe writes them again every second: at
/// 8 x 512 with 128 probed, parsing every text afresh took about 1,400 of
/// the poller's 4,600 allocations per tick. A text is read without a copy of
/// its own (serde_json lends it, from the file or, when it has escapes,
/// from its scratch buffer) and matched against the texts kept; only a new
/// one is allocated.
mod shared {
    use std::cell::RefCell;
    use std::fmt;
    use std::sync::Arc;

    use serde::Deserializer;
    use serde::de::{Error, Visitor};

    /// Texts kept per thread (the poller's, a test's); more distinct ones
    /// than this replace the oldest, so a hostile file costs at most
    /// `KEPT` x `LONGEST` bytes here.
    const KEPT: usize = 64;
    /// Longer texts are not kept: an allocator setting is a few dozen
    /// bytes, a UUID 40.
    const LONGEST: usize = 256;

    #[derive(Default)]
    struct Kept {
        texts: Vec<Arc<str>>,
        /// Where the next new text goes once `texts` is full.
        next: usize,
    }

    thread_local! {
        static KEPT_TEXTS: RefCell<Kept> = RefCell::default();
    }

    fn keep(text: &str) -> Arc<str> {
        if text.len() > LONGEST {
            return Arc::from(text);
        }
        KEPT_TEXTS.with_borrow_mut(|kept| {
            if let Some(found) = kept.texts.iter().find(|t| ***t == *text) {
                return Arc::clone(found);
            }
            let new: Arc<str> = Arc::from(text);
            if kept.texts.len() < KEPT {
                kept.texts.push(Arc::clone(&new));
            } else if let Some(slot) = kept.texts.get_mut(kept.next) {
                *slot = Arc::clone(&new);
                kept.next = (kept.next + 1) % KEPT;
            }
            new
        })
    }

    struct Text;

    impl Visitor<'_> for Text {
        type Value = Arc<str>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string")
        }

        fn visit_str<E: Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(keep(v))
        }
    }

    struct OptionalText;

    impl<'de> Visitor<'de> for OptionalText {
        type Value = Option<Arc<str>>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string or null")
        }

        fn visit_none<E: Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            text(d).map(Some)
        }
    }

    pub fn text<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<str>, D::Error> {
        d.deserialize_str(Text)
    }

    /// A missing field is `None` too, by the field's `default`.
    pub fn optional<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Arc<str>>, D::Error> {
        d.deserialize_option(OptionalText)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn the_same_text_is_shared_and_new_ones_past_the_cap_replace_the_oldest() {
            let parse = |json: &str| text(&mut serde_json::Deserializer::from_str(json)).unwrap();
            let a = parse(r#""2.5.1""#);
            assert!(Arc::ptr_eq(&a, &parse(r#""2.5.1""#)));
            assert!(Arc::ptr_eq(&a, &parse(r#""2.5\u002e1""#)), "escaped, the same text");
            let long = "x".repeat(LONGEST + 1);
            let quoted = format!("{long:?}");
            assert!(!Arc::ptr_eq(&parse(&quoted), &parse(&quoted)), "a long text is never kept");
            for i in 0..KEPT {
                parse(&format!("\"{i}\""));
            }
            KEPT_TEXTS.with_borrow(|k| assert_eq!(k.texts.len(), KEPT, "bounded"));
            assert!(!Arc::ptr_eq(&a, &parse(r#""2.5.1""#)), "replaced once past the cap");
            let none = |json: &str| optional(&mut serde_json::Deserializer::from_str(json)).unwrap();
            assert_eq!(none("null"), None);
            assert_eq!(none(r#""a""#).as_deref(), Some("a"));
            assert!(optional(&mut serde_json::Deserializer::from_str("3")).is_err());
            assert!(text(&mut serde_json::Deserializer::from_str("null")).is_err());
        }
    }
}

/// The device list, grown from room for one: a rank has one device, and
/// a list grown by pushes alone takes room for four (about 1.4 KB kept
/// per probe), which `parse` would then give back in a second allocation.
fn devices<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ProbeDevice>, D::Error> {
    struct Devices;

    impl<'de> serde::de::Visitor<'de> for Devices {
        type Value = Vec<ProbeDevice>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of devices")
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut list = Vec::with_capacity(seq.size_hint().unwrap_or(1).clamp(1, MAX_DEVICES));
            while let Some(device) = seq.next_element()? {
                list.push(device);
            }
            Ok(list)
        }
    }

    d.deserialize_seq(Devices)
}

/// Tells a text field that is there but null from one that is missing;
/// the text shared as the others are.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<Arc<str>>>, D::Error> {
    shared::optional(d).map(Some)
}

/// The probe keeps 8 post-mortems of at most 16 segments and two pools;
/// anything beyond a little more than that is not a probe's file.
fn check_post_mortems(records: &[OomPostMortem]) -> Result<(), String> {
    if records.len() > 16 {
        return Err(format!("{} OOM post-mortems", records.len()));
    }
    for r in records {
        let pools = r.pools.as_deref().unwrap_or_default();
        let segments = r.segments.as_deref().unwrap_or_default();
        let known = |p: &str| matches!(p, "large" | "small");
        if pools.len() > 4 || segments.len() > 64 {
            return Err("an OOM post-mortem larger than a probe writes".into());
        }
        if !matches!(r.source.as_str(), "observer" | "exception")
            || !pools.iter().all(|p| known(&p.pool))
            || !segments.iter().all(|s| known(&s.pool))
            || r.verdict.is_some()
            || r.gpu.is_some()
        {
            return Err("an OOM post-mortem the probe would not write".into());
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) fn sample_json(pid: u32, start_ticks: u64) -> String {
    let device = serde_json::json!({"index": 0, "uuid": "GPU-aaaa", "pci_bus_id": "00000000:18:00.0",
        "private_pools_reserved": null, "allocated": 100, "allocated_peak": 150, "reserved": 200,
        "reserved_peak": 250, "active": 120, "active_peak": 160, "inactive_split": 30, "inactive_split_peak": 40,
        "requested": 90, "requested_peak": 140, "segments": 4, "alloc_retries": 0, "ooms": 0,
        "device_allocs": 5, "device_frees": 1, "largest_free_block": null, "bytes_limit": null});
    serde_json::json!({
        "format": "gpuscope-probe", "version": 1, "pid": pid, "start_ticks": start_ticks, "seq": 3,
        "written_unix_ms": 1_795_289_400_123u64, "interval_s": 1.0, "errors": 0,
        "framework": "torch", "framework_version": "2.5.1", "backend": "native",
        "alloc_conf": "max_split_size_mb:512", "alloc_conf_var": "PYTORCH_CUDA_ALLOC_CONF",
        "alloc_conf_source": "environment",
        "alloc_conf_env": {"PYTORCH_ALLOC_CONF": null, "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512"},
        "expandable_segments": false, "cuda_visible_devices": null, "cuda_device_order": null, "oom_events": 0,
        "rank": 0, "local_rank": 0, "world_size": 2, "pinned_host": {"current": 1024, "peak": 2048},
        "devices": [device]
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    /// Hands out at most `step` bytes a read, as a pipe might; counts reads.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
        reads: usize,
    }

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            self.reads += 1;
            let n = self.data.len().min(out.len()).min(self.step);
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_job_key_long_enough_to_bloat_every_output_is_cut() {
        let mut v: serde_json::Value = serde_json::from_str(&sample_json(42, 7)).unwrap();
        v["job"] = format!("{}\u{202E}", "j".repeat(60_000)).into();
        let job = ProbeFile::parse(&v.to_string(), 42, 7).unwrap().job.unwrap();
        assert_eq!(job.chars().count(), NAME_MAX_CHARS);
        assert!(job.ends_with('…') && !job.contains('\u{202E}'));
        v["job"] = "10.1.2.3:29500".into();
        assert_eq!(ProbeFile::parse(&v.to_string(), 42, 7).unwrap().job.as_deref(), Some("10.1.2.3:29500"));
    }

    #[test]
    fn a_file_of_its_stated_size_takes_one_read_and_any_other_is_read_whole_up_to_the_limit() {
        let mut buf = vec![7; 3];
        let text = b"{\"format\": 1}";
        let mut one = Trickle { data: text, step: usize::MAX, reads: 0 };
        super::read_regular(&mut one, text.len() as u64, &mut buf).unwrap();
        assert_eq!((buf.as_slice(), one.reads), (&text[..], 1));
        // Larger than its metadata said, or handed out piecemeal: all of it.
        let big = vec![b'x'; 10_000];
        for (size, step) in [(10, usize::MAX), (0, usize::MAX), (10_000, 999), (20_000, 1)] {
            let mut r = Trickle { data: &big, step, reads: 0 };
            super::read_regular(&mut r, size, &mut buf).unwrap();
            assert!(buf == big, "size {size}, step {step}: {} bytes", buf.len());
        }
        // Past the limit: the limit and one byte, for the caller to refuse.
        let huge = vec![b'y'; 200_000];
        super::read_regular(&mut Trickle { data: &huge, step: usize::MAX, reads: 0 }, 5, &mut buf).unwrap();
        assert_eq!(buf.len() as u64, super::MAX_FILE_BYTES + 1);
        super::read_regular(&mut Trickle { data: b"", step: 1, reads: 0 }, 0, &mut buf).unwrap();
        assert!(buf.is_empty());
    }

    use super::*;

    #[test]
    fn a_good_file_parses() {
        let f = ProbeFile::parse(&sample_json(42, 7), 42, 7).unwrap();
        assert_eq!(f.devices[0].reserved, Some(200));
        assert_eq!(f.devices.capacity(), f.devices.len(), "kept without room to grow");
        assert_eq!(f.pinned_host, Some(PinnedHost { current: Some(1024), peak: Some(2048) }));
        assert_eq!(f.devices[0].pci_bus_id.as_deref(), Some("00000000:18:00.0"));
        assert_eq!(f.cuda_visible_devices, Some(None), "there, and unset");
        assert_eq!((f.oom_events, f.alloc_conf_source.as_deref()), (Some(0), Some("environment")));
        let env = f.alloc_conf_env.unwrap();
        assert_eq!(
            (env.pytorch_alloc_conf, env.pytorch_cuda_alloc_conf.as_deref()),
            (None, Some("max_split_size_mb:512"))
        );
    }

    #[test]
    fn a_file_from_the_previous_probe_still_parses() {
        let mut v: serde_json::Value = serde_json::from_str(&sample_json(42, 7)).unwrap();
        let top = v.as_object_mut().unwrap();
        for k in ["alloc_conf_source", "alloc_conf_env", "cuda_visible_devices", "cuda_device_order", "oom_events"] {
            top.remove(k);
        }
        let dev = v["devices"][0].as_object_mut().unwrap();
        dev.remove("pci_bus_id");
        dev.remove("private_pools_reserved");
        let f = ProbeFile::parse(&v.to_string(), 42, 7).unwrap();
        assert_eq!(f.cuda_visible_devices, None, "missing, not unset");
        assert_eq!((f.oom_events, f.alloc_conf_env, f.devices[0].pci_bus_id.clone()), (None, None, None));
        let both_unset = sample_json(42, 7).replace("\"max_split_size_mb:512\"}", "null}");
        let env = ProbeFile::parse(&both_unset, 42, 7).unwrap().alloc_conf_env;
        assert_eq!(env, Some(AllocConfEnv::default()), "both unset is not \"not reported\"");
    }

    #[test]
    fn new_fields_are_typed_and_sanitised() {
        let with = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v: serde_json::Value = serde_json::from_str(&sample_json(42, 7)).unwrap();
            f(&mut v);
            ProbeFile::parse(&v.to_string(), 42, 7)
        };
        assert!(with(&|v| v["oom_events"] = (-1).into()).is_err());
        assert!(with(&|v| v["devices"][0]["private_pools_reserved"] = "lots".into()).is_err());
        assert!(with(&|v| v["cuda_visible_devices"] = 3.into()).is_err());
        let f = with(&|v| {
            v["cuda_visible_devices"] = "2, 0".into();
            v["devices"][0]["pci_bus_id"] = "0000:3b:00.0\u{1b}[2J".into();
            v["alloc_conf_env"]["PYTORCH_ALLOC_CONF"] = "backend:cudaMallocAsync\u{7}".into();
        })
        .unwrap();
        assert_eq!(f.cuda_visible_devices, Some(Some("2, 0".into())), "spaces kept as the process has them");
        assert_eq!(f.devices[0].pci_bus_id.as_deref(), Some("0000:3b:00.0"));
        assert_eq!(f.alloc_conf_env.unwrap().pytorch_alloc_conf.as_deref(), Some("backend:cudaMallocAsync"));
        let f = with(&|v| v["cuda_visible_devices"] = "0,\u{1b}[2J1".into()).unwrap();
        assert_eq!(f.cuda_visible_devices, Some(Some("0,1".into())));
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
