//! Property tests of the inputs gpuscope takes from others: probe files,
//! the config file, and HTTP requests to `serve`. None may panic or bring
//! the server down; config errors name the key at fault. (The recording
//! reader's properties are in `src/recording/tests.rs`, next to its line
//! reader.)

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use gpuscope::config::Config;
use gpuscope::probe::files::ProbeFile;
use proptest::prelude::*;
use serde_json::{Value, json};

fn probe_sample() -> Value {
    let mut v = json!({
        "format": "gpuscope-probe", "version": 1, "pid": 42, "start_ticks": 7, "seq": 3,
        "written_unix_ms": 1_795_289_400_123u64, "interval_s": 1.0, "errors": 0,
        "framework": "torch", "framework_version": "2.5.1", "backend": "native",
        "alloc_conf": null, "alloc_conf_var": null, "expandable_segments": false,
        "rank": 0, "local_rank": 0, "world_size": 2, "pinned_host": {"current": 1024, "peak": 2048},
        "devices": [{"index": 0, "uuid": "GPU-aaaa", "allocated": 100, "allocated_peak": 150, "reserved": 200,
            "reserved_peak": 250, "active": 120, "active_peak": 160, "inactive_split": 30, "inactive_split_peak": 40,
            "requested": 90, "requested_peak": 140, "segments": 4, "alloc_retries": 0, "ooms": 0,
            "device_allocs": 5, "device_frees": 1, "largest_free_block": null, "bytes_limit": null}]
    });
    v["input"] = json!({"hooked": true, "window_s": 30.0, "loaders_left_out": 0,
        "loaders": [{"id": 1, "live": true, "consumer_thread": "MainThread", "batches": 9, "epochs": 1,
            "window_s": 5.0, "batches_per_s": 1.8, "wait_share": 0.5, "wait_per_batch_s": 0.3,
            "waiting_s": 0.0, "first_batch_wait_s": 1.0, "iterator": "_MultiProcessingDataLoaderIter",
            "dataset": "D", "num_workers": 1, "pin_memory": true, "prefetch_factor": 2,
            "persistent_workers": false, "workers": 1, "worker_pids": [7], "pin_memory_thread": true,
            "batches_ready": 1, "batch_bytes": 10, "shm_need": 40}],
        "shm": {"path": "/dev/shm", "total": 100, "free": 50, "need": 40, "sharing_strategy": "file_system",
            "open_files_limit": 1024, "open_files_limit_hard": 1024},
        "failures": [{"time_unix_ms": 1, "kind": "timeout", "exception": "RuntimeError", "message": "m",
            "loader": 1, "worker_pid": 7, "shm_total": 100, "shm_free": 0, "sharing_strategy": null,
            "batch_bytes": 10, "num_workers": 1, "pin_memory": true, "prefetch_factor": 2,
            "persistent_workers": false}]});
    v["environment"] = json!({"torch_version": "2.9.1", "cuda_version": "12.8", "hip_version": null,
        "cudnn_version": "9.10.2", "cudnn_compiled_version": "9.10.2", "arch_flags": "sm_90",
        "fp32_precision_matmul": "tf32", "fp32_precision_conv": "tf32", "matmul_tf32": true,
        "cudnn_tf32": true, "float32_matmul_precision": null, "cudnn_benchmark": false,
        "cudnn_deterministic": true, "devices": [{"index": 0, "capability": "9.0", "arch_supported": true}],
        "autocast": {"hooked": true, "entries": 3, "last_s_ago": 1.5, "device_type": "cuda",
            "dtype": "torch.float16"},
        "grad_scaler": {"count": null, "enabled": null}});
    v
}

/// Where every value of a JSON document is: the keys and indices to it.
fn paths(v: &Value, at: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    let children: Vec<(Value, &Value)> = match v {
        Value::Object(m) => m.iter().map(|(k, v)| (Value::from(k.as_str()), v)).collect(),
        Value::Array(a) => a.iter().enumerate().map(|(i, v)| (Value::from(i), v)).collect(),
        _ => return,
    };
    for (step, child) in children {
        at.push(step);
        out.push(at.clone());
        paths(child, at, out);
        at.pop();
    }
}

/// The probe sample with the value at one path (under `input` or
/// `environment`, at any depth) replaced, or removed.
fn mutated_part() -> impl Strategy<Value = String> {
    let mut all = Vec::new();
    for part in ["input", "environment"] {
        let mut found = Vec::new();
        paths(&probe_sample()[part], &mut vec![Value::from(part)], &mut found);
        all.extend(found);
    }
    (prop::sample::select(all), any_json(), any::<bool>()).prop_map(|(path, value, remove)| {
        let mut v = probe_sample();
        let (last, parents) = path.split_last().unwrap();
        let mut node = &mut v;
        for step in parents {
            node = match step {
                Value::String(k) => &mut node[k.as_str()],
                other => &mut node[other.as_u64().unwrap() as usize],
            };
        }
        match (last, node) {
            (Value::String(k), Value::Object(m)) if remove => drop(m.remove(k)),
            (Value::String(k), node) => node[k.as_str()] = value,
            (i, node) => node[i.as_u64().unwrap() as usize] = value,
        }
        v.to_string()
    })
}

/// A text fit for a terminal line of at most `max` characters.
fn tame(text: &Option<String>, max: usize) -> bool {
    text.as_deref().is_none_or(|t| t.chars().count() <= max && !t.chars().any(char::is_control))
}

/// JSON values of every kind, the awkward ones often.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        Just(json!(1e308)),
        Just(json!(-0.0)),
        ".{0,40}".prop_map(Value::from),
        Just(Value::from("\u{1b}[2J\u{202E}evil")),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::hash_map(".{0,8}", inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A probe file with one field replaced, removed, or its devices multiplied.
fn mutated_probe() -> impl Strategy<Value = String> {
    let fields: Vec<String> = probe_sample().as_object().unwrap().keys().cloned().collect();
    let device_fields: Vec<String> = probe_sample()["devices"][0].as_object().unwrap().keys().cloned().collect();
    (prop::sample::select(fields), prop::sample::select(device_fields), any_json(), 0u8..4, 0usize..200).prop_map(
        |(field, device_field, value, how, devices)| {
            let mut v = probe_sample();
            match how {
                0 => v[&field] = value,
                1 => drop(v.as_object_mut().unwrap().remove(&field)),
                2 => v["devices"][0][&device_field] = value,
                _ => {
                    let d = v["devices"][0].clone();
                    v["devices"] = Value::Array(vec![d; devices]);
                }
            }
            v.to_string()
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn probe_files_never_panic_the_parser(text in prop_oneof![
        mutated_probe(),
        any_json().prop_map(|v| v.to_string()),
        ".{0,200}",
        mutated_probe().prop_flat_map(|t| { let n = t.len(); (Just(t), 0..n) }).prop_map(|(t, n)| t[..t.floor_char_boundary(n)].to_string()),
    ]) {
        if let Ok(f) = ProbeFile::parse(&text, 42, 7) {
            prop_assert_eq!((f.pid, f.start_ticks), (42, 7));
            prop_assert!(f.devices.len() <= 64);
            prop_assert!(f.interval_s.is_finite() && f.interval_s > 0.0);
        }
    }

    #[test]
    fn the_input_and_environment_parts_keep_their_bounds(text in mutated_part()) {
        let Ok(f) = ProbeFile::parse(&text, 42, 7) else { return Ok(()) };
        if let Some(input) = &f.input {
            prop_assert!(input.loaders.len() <= 16 && input.failures.len() <= 8);
            for l in &input.loaders {
                prop_assert!(l.wait_share.is_none_or(|s| (0.0..=1.0).contains(&s)));
                for v in [l.window_s, l.batches_per_s, l.wait_per_batch_s, l.waiting_s, l.first_batch_wait_s] {
                    prop_assert!(v.is_none_or(|v| v.is_finite() && v >= 0.0));
                }
                prop_assert!(l.worker_pids.as_ref().is_none_or(|p| p.len() <= 128));
                prop_assert!(tame(&l.dataset, 128) && tame(&l.iterator, 128) && tame(&l.consumer_thread, 128));
            }
            if let Some(shm) = &input.shm {
                prop_assert!(shm.used_share().is_none_or(|s| (0.0..=1.0).contains(&s)));
                prop_assert!(tame(&shm.sharing_strategy, 128));
            }
            for failure in &input.failures {
                prop_assert!(tame(&failure.message, 1024) && tame(&failure.exception, 128));
            }
        }
        if let Some(env) = &f.environment {
            prop_assert!(env.devices.len() <= 64);
            prop_assert!(tame(&env.arch_flags, 512) && tame(&env.torch_version, 128));
            prop_assert!(env.autocast.as_ref().is_none_or(|a| a.last_s_ago.is_none_or(|s| s.is_finite() && s >= 0.0)));
        }
    }
}

/// Every key of the example config, with its table, and a value of
/// another type than it takes.
fn config_keys() -> Vec<(String, String, toml::Value)> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml")).unwrap();
    let table: toml::Table = text.parse().unwrap();
    let mut out = Vec::new();
    fn walk(t: &toml::Table, path: &str, out: &mut Vec<(String, String, toml::Value)>) {
        for (k, v) in t {
            match v {
                toml::Value::Table(inner) => {
                    walk(inner, &if path.is_empty() { k.clone() } else { format!("{path}.{k}") }, out)
                }
                other => out.push((path.to_string(), k.clone(), other.clone())),
            }
        }
    }
    walk(&table, "", &mut out);
    out
}

fn wrong_type(v: &toml::Value) -> Vec<String> {
    match v {
        toml::Value::String(_) => vec!["12".into(), "true".into(), "[1]".into()],
        toml::Value::Integer(_) | toml::Value::Float(_) => vec!["\"x\"".into(), "[\"a\"]".into(), "{ a = 1 }".into()],
        toml::Value::Boolean(_) => vec!["\"yes\"".into(), "1".into()],
        toml::Value::Array(_) => vec!["\"x\"".into(), "3".into()],
        _ => vec!["{ a = 1 }".into()],
    }
}

#[test]
fn a_wrong_type_for_any_key_names_that_key() {
    let keys = config_keys();
    assert!(keys.len() > 20, "{keys:?}");
    for (table, key, value) in keys {
        for bad in wrong_type(&value) {
            let text = match table.as_str() {
                "" => format!("{key} = {bad}\n"),
                t => format!("[{t}]\n{key} = {bad}\n"),
            };
            let err = Config::parse(&text, Path::new("/etc/gpuscope.toml")).unwrap_err().to_string();
            assert!(err.contains(&key) && err.contains("/etc/gpuscope.toml"), "{text}: {err}");
        }
    }
}

fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|i| i.to_string()),
        any::<f64>().prop_map(|f| format!("{f:?}")),
        Just("nan".to_string()),
        Just("-inf".to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        "[a-z0-9 .]{0,12}".prop_map(|s| format!("{s:?}")),
        (any::<u64>(), prop::sample::select(vec!["ns", "ms", "s", "m", "h", "d", "y"]))
            .prop_map(|(n, u)| format!("\"{n}{u}\"")),
        Just("[]".to_string()),
        Just("[\"sh\", \"-c\"]".to_string()),
        Just("{ x = 1 }".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Arbitrary tables, keys and values: parsed or refused, never a panic;
    /// a refusal says where.
    #[test]
    fn any_config_text_is_parsed_or_refused_without_a_panic(lines in prop::collection::vec(
        (
            prop::option::of(prop::sample::select(vec!["history", "alerts", "alerts.leak", "alerts.fragmentation",
                "alerts.memory_pressure", "alerts.starved", "alerts.oom", "alerts.gpu_lost", "alerts.sm_idle",
                "alerts.tensor_idle", "nope"])),
            prop::sample::select(vec!["interval", "gpus", "nvml_lib", "window", "enabled", "enter", "exit",
                "min_samples", "slope", "exec", "exec_min_interval", "duration", "critical", "colour", "min_reserved"]),
            toml_value(),
        ),
        0..6,
    ), garbage in prop::option::of(".{0,40}")) {
        let mut text = String::new();
        for (table, key, value) in &lines {
            if let Some(t) = table {
                text.push_str(&format!("[{t}]\n"));
            }
            text.push_str(&format!("{key} = {value}\n"));
        }
        if let Some(g) = garbage {
            text.push_str(&g);
        }
        if let Err(e) = Config::parse(&text, Path::new("/etc/gpuscope.toml")) {
            prop_assert!(e.to_string().contains("/etc/gpuscope.toml"), "{}", e);
        }
    }
}

/// Bytes a client might send: request lines with odd methods, paths and
/// versions, odd and oversized headers, bodies, or plain noise.
fn request() -> impl Strategy<Value = Vec<u8>> {
    let method =
        prop::sample::select(vec!["GET", "POST", "HEAD", "PUT", "OPTIONS", "TRACE", "CONNECT", "get", "", "G\0T"]);
    let path = prop_oneof![
        prop::sample::select(vec!["/metrics", "/snapshot", "/healthz", "/", "*", "//", "/metrics?x=1#y"])
            .prop_map(String::from),
        "/[ -~]{0,40}",
        ".{0,20}",
        (1usize..20_000).prop_map(|n| format!("/{}", "a".repeat(n))),
    ];
    let version = prop::sample::select(vec!["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/9", "", "HTTP/1.1 extra"]);
    let header = prop_oneof![
        Just("Host: x".to_string()),
        Just("Accept: application/openmetrics-text; version=1.0.0".to_string()),
        Just("Content-Length: 5".to_string()),
        Just("Content-Length: -1".to_string()),
        Just("Content-Length: 99999999999999999999".to_string()),
        Just("Transfer-Encoding: chunked".to_string()),
        Just("Connection: keep-alive".to_string()),
        Just("Expect: 100-continue".to_string()),
        "[!-~]{1,10}: [ -~]{0,30}",
        "[ -~]{0,30}",
        (1usize..20_000).prop_map(|n| format!("X-Big: {}", "b".repeat(n))),
    ];
    let structured =
        (method, path, version, prop::collection::vec(header, 0..6), prop::collection::vec(any::<u8>(), 0..64))
            .prop_map(|(m, p, v, h, body)| {
                let mut out =
                    format!("{m} {p} {v}\r\n{}\r\n", h.iter().map(|h| format!("{h}\r\n")).collect::<String>())
                        .into_bytes();
                out.extend(body);
                out
            });
    prop_oneof![4 => structured, 1 => prop::collection::vec(any::<u8>(), 0..512)]
}

/// Sends `bytes`, reads whatever comes back for a moment, hangs up.
fn poke(addr: std::net::SocketAddr, bytes: &[u8]) {
    let Ok(mut s) = TcpStream::connect(addr) else { return };
    s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let _ = s.write_all(bytes);
    let _ = s.read(&mut [0u8; 4096]);
}

#[test]
fn any_request_leaves_the_server_serving() {
    let sim = common::Sim::new("[[gpu]]\nname = \"Fuzz\"\n");
    let server = serve_common::Server::start(
        sim.gpuscope(),
        &["--listen", "127.0.0.1:0", "--interval", "200ms", "--header-timeout", "1s"],
    );
    server.until("/healthz", "ok", |r| r.status == 200);
    let addr = server.addr;
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig { cases: 128, ..ProptestConfig::default() });
    runner
        .run(&request(), |bytes| {
            poke(addr, &bytes);
            let r = serve_common::get(addr, "/healthz", None);
            prop_assert_eq!(r.status, 200, "after {:?}", String::from_utf8_lossy(&bytes));
            Ok(())
        })
        .unwrap();
    assert!(server.get("/metrics").body.contains("gpuscope_build_info"));
    let mut server = server;
    assert!(server.child.try_wait().unwrap().is_none(), "still running: {}", server.stderr());
}
