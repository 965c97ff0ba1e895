//! The probe file's `input` and `environment` parts: read into the model's
//! own types, then held to what a probe writes. A list longer than a probe
//! writes refuses the file, as the rest of the format does (the same
//! sections from a fleet node are cut instead: `bound_*`); a figure out of
//! its range (a share above 1, a negative or endless rate) becomes `None`;
//! every text is made safe for a terminal and bounded.

use crate::model::{DataLoaderStats, FrameworkEnvironment, InputPipeline, LoaderFailure, SharedMemory};
use crate::sources::{NAME_MAX_CHARS, bounded, sanitize_command};

/// Twice what the probe writes (8 loaders, 4 failures, 64 worker PIDs, 64
/// devices): beyond that, not a probe's file.
const MAX_LOADERS: usize = 16;
const MAX_FAILURES: usize = 8;
const MAX_WORKER_PIDS: usize = 128;
const MAX_DEVICES: usize = 64;
/// The probe keeps a message's start and end within 1,024 characters.
const MESSAGE_MAX_CHARS: usize = 1024;
const ARCH_FLAGS_MAX_CHARS: usize = 512;
/// Seconds and rates past this (about 30 years; a billion batches a
/// second) are no measurement.
const MAX_FIGURE: f64 = 1e9;

pub(super) fn check_input(input: &mut InputPipeline) -> Result<(), String> {
    if input.loaders.len() > MAX_LOADERS || input.failures.len() > MAX_FAILURES {
        return Err("an input section larger than a probe writes".into());
    }
    if input.loaders.iter().any(|l| l.worker_pids.as_ref().is_some_and(|p| p.len() > MAX_WORKER_PIDS)) {
        return Err("a loader with more worker PIDs than a probe writes".into());
    }
    hold_input(input);
    Ok(())
}

/// An input section that did not come from a probe file (a fleet node's
/// `/snapshot`): its lists cut to what a file may hold, rather than
/// refused, then held to the same checks.
pub fn bound_input(input: &mut InputPipeline) {
    input.loaders.truncate(MAX_LOADERS);
    input.failures.truncate(MAX_FAILURES);
    for pids in input.loaders.iter_mut().filter_map(|l| l.worker_pids.as_mut()) {
        pids.truncate(MAX_WORKER_PIDS);
    }
    hold_input(input);
}

/// Figures to their range, texts made safe and bounded; the lists are
/// within their bounds already.
fn hold_input(input: &mut InputPipeline) {
    input.window_s = figure(input.window_s);
    input.loaders.iter_mut().for_each(hold_loader);
    if let Some(shm) = &mut input.shm {
        check_shm(shm);
    }
    input.failures.iter_mut().for_each(check_failure);
    input.loaders.shrink_to_fit();
    input.failures.shrink_to_fit();
}

fn hold_loader(l: &mut DataLoaderStats) {
    for value in
        [&mut l.window_s, &mut l.batches_per_s, &mut l.wait_per_batch_s, &mut l.waiting_s, &mut l.first_batch_wait_s]
    {
        *value = figure(*value);
    }
    l.wait_share = l.wait_share.filter(|s| (0.0..=1.0).contains(s));
    for text in [&mut l.consumer_thread, &mut l.iterator, &mut l.dataset] {
        label(text, NAME_MAX_CHARS);
    }
}

fn check_shm(shm: &mut SharedMemory) {
    // statvfs never reports more free than total; a file that does says
    // nothing about either.
    if let (Some(total), Some(free)) = (shm.total, shm.free)
        && free > total
    {
        shm.free = None;
    }
    shm.used = shm.total.zip(shm.free).map(|(total, free)| total - free);
    label(&mut shm.path, NAME_MAX_CHARS);
    label(&mut shm.sharing_strategy, NAME_MAX_CHARS);
}

fn check_failure(f: &mut LoaderFailure) {
    if let (Some(total), Some(free)) = (f.shm_total, f.shm_free)
        && free > total
    {
        f.shm_free = None;
    }
    label(&mut f.message, MESSAGE_MAX_CHARS);
    label(&mut f.exception, NAME_MAX_CHARS);
    label(&mut f.sharing_strategy, NAME_MAX_CHARS);
}

pub(super) fn check_environment(env: &mut FrameworkEnvironment) -> Result<(), String> {
    if env.devices.len() > MAX_DEVICES {
        return Err("an environment with more devices than a probe writes".into());
    }
    hold_environment(env);
    Ok(())
}

/// An environment from elsewhere (a fleet node's `/snapshot`), as
/// [`bound_input`] takes an input section.
pub fn bound_environment(env: &mut FrameworkEnvironment) {
    env.devices.truncate(MAX_DEVICES);
    hold_environment(env);
}

fn hold_environment(env: &mut FrameworkEnvironment) {
    for text in [
        &mut env.torch_version,
        &mut env.cuda_version,
        &mut env.hip_version,
        &mut env.cudnn_version,
        &mut env.cudnn_compiled_version,
        &mut env.fp32_precision_matmul,
        &mut env.fp32_precision_conv,
        &mut env.float32_matmul_precision,
    ] {
        label(text, NAME_MAX_CHARS);
    }
    label(&mut env.arch_flags, ARCH_FLAGS_MAX_CHARS);
    for device in &mut env.devices {
        label(&mut device.capability, NAME_MAX_CHARS);
    }
    if let Some(autocast) = &mut env.autocast {
        autocast.last_s_ago = figure(autocast.last_s_ago);
        label(&mut autocast.device_type, NAME_MAX_CHARS);
        label(&mut autocast.dtype, NAME_MAX_CHARS);
    }
    env.devices.shrink_to_fit();
}

/// Seconds or a rate: finite, not negative, not absurd.
fn figure(value: Option<f64>) -> Option<f64> {
    value.filter(|v| v.is_finite() && (0.0..=MAX_FIGURE).contains(v))
}

/// A text a process wrote, fit for a terminal line: escape sequences and
/// control characters out, invisible characters shown, at most `max`
/// characters; an empty one is none.
fn label(text: &mut Option<String>, max: usize) {
    if let Some(raw) = text.take() {
        let clean = sanitize_command(&raw);
        let cut = bounded(&clean, max).into_owned();
        *text = (!cut.is_empty()).then_some(cut);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::file::{ProbeFile, sample_json};
    use crate::model::LoaderFailureKind;

    fn input_sample() -> Value {
        json!({
            "hooked": true, "window_s": 30.0,
            "loaders": [{
                "id": 1, "live": true, "consumer_thread": "MainThread", "batches": 500, "epochs": 2,
                "window_s": 29.5, "batches_per_s": 16.9, "wait_share": 0.41, "wait_per_batch_s": 0.024,
                "waiting_s": 0.0, "first_batch_wait_s": 2.5, "iterator": "_MultiProcessingDataLoaderIter",
                "dataset": "ImageFolder", "num_workers": 4, "pin_memory": false, "prefetch_factor": 2,
                "persistent_workers": false, "workers": 4, "worker_pids": [101, 102, 103, 104],
                "pin_memory_thread": false, "batches_ready": 0, "batch_bytes": 4_194_304,
                "shm_need": 41_943_040u64
            }],
            "loaders_left_out": 0,
            "shm": {"path": "/dev/shm", "total": 67_108_864u64, "free": 8_388_608u64, "need": 41_943_040u64,
                    "sharing_strategy": "file_descriptor", "open_files_limit": 1024, "open_files_limit_hard": 4096},
            "failures": [{
                "time_unix_ms": 1_795_289_400_000u64, "kind": "bus_error", "exception": "RuntimeError",
                "message": "DataLoader worker (pid 103) is killed by signal: Bus error. ...", "loader": 1,
                "worker_pid": 103, "shm_total": 67_108_864u64, "shm_free": 0, "sharing_strategy": "file_descriptor",
                "batch_bytes": 4_194_304, "num_workers": 4, "pin_memory": false, "prefetch_factor": 2,
                "persistent_workers": false
            }]
        })
    }

    fn environment_sample() -> Value {
        json!({
            "torch_version": "2.5.1", "cuda_version": "12.4", "hip_version": null, "cudnn_version": "9.1.0",
            "cudnn_compiled_version": "9.1.0", "arch_flags": "sm_80 sm_86 sm_90",
            "fp32_precision_matmul": null, "fp32_precision_conv": null, "matmul_tf32": false, "cudnn_tf32": true,
            "float32_matmul_precision": "highest", "cudnn_benchmark": true, "cudnn_deterministic": false,
            "devices": [{"index": 0, "capability": "9.0", "arch_supported": true}],
            "autocast": {"hooked": true, "entries": 12000, "last_s_ago": 0.2, "device_type": "cuda",
                         "dtype": "torch.bfloat16"},
            "grad_scaler": {"count": 1, "enabled": true}
        })
    }

    fn file_with(input: Value, environment: Value) -> String {
        let mut v: Value = serde_json::from_str(&sample_json(42, 7)).unwrap();
        v["input"] = input;
        v["environment"] = environment;
        v.to_string()
    }

    fn parse(input: Value, environment: Value) -> Result<ProbeFile, String> {
        ProbeFile::parse(&file_with(input, environment), 42, 7)
    }

    #[test]
    fn the_input_and_environment_parse_into_the_model() {
        let f = parse(input_sample(), environment_sample()).unwrap();
        let input = f.input.unwrap();
        let loader = &input.loaders[0];
        assert_eq!(
            (loader.wait_share, loader.settings.num_workers, loader.settings.prefetch_factor),
            (Some(0.41), Some(4), Some(2))
        );
        assert_eq!(loader.worker_pids.as_deref(), Some(&[101, 102, 103, 104][..]));
        let shm = input.shm.as_ref().unwrap();
        assert_eq!((shm.used, shm.used_share()), (Some(58_720_256), Some(0.875)));
        assert_eq!(input.failures[0].kind, LoaderFailureKind::BusError);
        assert_eq!(input.wait_share(), Some(0.41));
        let env = f.environment.unwrap();
        assert_eq!((env.devices[0].ordinal, env.devices[0].arch_supported), (0, Some(true)));
        assert_eq!(env.autocast.as_ref().unwrap().dtype.as_deref(), Some("torch.bfloat16"));
    }

    #[test]
    fn files_without_the_parts_still_parse_and_null_is_none() {
        let old = ProbeFile::parse(&sample_json(42, 7), 42, 7).unwrap();
        assert_eq!((old.input, old.environment), (None, None));
        let null = parse(Value::Null, Value::Null).unwrap();
        assert_eq!((null.input, null.environment), (None, None));
        // A probe older than some inner fields: they are unknown.
        let sparse = parse(json!({"loaders": [{"id": 3}]}), json!({})).unwrap();
        let loader = &sparse.input.as_ref().unwrap().loaders[0];
        assert_eq!((loader.id, loader.wait_share, loader.settings.num_workers), (3, None, None));
        assert!(!sparse.input.unwrap().hooked);
    }

    #[test]
    fn hostile_values_are_bounded() {
        let mut input = input_sample();
        let loader = &mut input["loaders"][0];
        loader["wait_share"] = json!(1.7);
        loader["batches_per_s"] = json!(-3.0);
        loader["waiting_s"] = json!(1e300);
        loader["dataset"] = json!(format!("{}\u{1b}[2J\u{202E}", "D".repeat(5000)));
        input["shm"]["free"] = json!(u64::MAX);
        input["failures"][0]["message"] = json!(format!("line one\nline two\u{7}{}", "x".repeat(10_000)));
        input["failures"][0]["kind"] = json!("a_kind_from_a_newer_probe");
        let mut env = environment_sample();
        env["arch_flags"] = json!("sm_90 ".repeat(1000));
        env["autocast"]["last_s_ago"] = json!(-1.0);
        let f = parse(input, env).unwrap();
        let input = f.input.unwrap();
        let loader = &input.loaders[0];
        assert_eq!((loader.wait_share, loader.batches_per_s, loader.waiting_s), (None, None, None));
        let dataset = loader.dataset.as_deref().unwrap();
        assert_eq!(dataset.chars().count(), NAME_MAX_CHARS);
        assert!(!dataset.contains('\u{1b}') && !dataset.contains('\u{202E}'));
        let shm = input.shm.as_ref().unwrap();
        assert_eq!((shm.free, shm.used), (None, None), "more free than total: neither is believed");
        let failure = &input.failures[0];
        assert_eq!(failure.kind, LoaderFailureKind::Other);
        let message = failure.message.as_deref().unwrap();
        assert!(message.starts_with("line one line two") && message.chars().count() == MESSAGE_MAX_CHARS);
        let env = f.environment.unwrap();
        assert_eq!(env.arch_flags.as_deref().unwrap().chars().count(), ARCH_FLAGS_MAX_CHARS);
        assert_eq!(env.autocast.as_ref().unwrap().last_s_ago, None);
    }

    #[test]
    fn lists_longer_than_a_probe_writes_refuse_the_file() {
        let loader = input_sample()["loaders"][0].clone();
        let mut many = input_sample();
        many["loaders"] = json!(vec![loader; MAX_LOADERS + 1]);
        assert!(parse(many, Value::Null).unwrap_err().contains("larger than a probe writes"));
        let mut pids = input_sample();
        pids["loaders"][0]["worker_pids"] = json!(vec![1; MAX_WORKER_PIDS + 1]);
        assert!(parse(pids, Value::Null).is_err());
        let mut env = environment_sample();
        env["devices"] = json!(vec![env["devices"][0].clone(); MAX_DEVICES + 1]);
        assert!(parse(Value::Null, env).is_err());
        let mut typed = input_sample();
        typed["loaders"][0]["num_workers"] = json!(-1);
        assert!(parse(typed, Value::Null).is_err(), "a wrong type is no probe's file");
    }

    use super::*;
}
