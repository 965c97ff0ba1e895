//! A real Prometheus (Debian's package) scrapes `gpuscope serve` on the
//! simulated NVML, with a probed pretend trainer, and PromQL gets the
//! scenario's figures back.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_common;

use common::trainer::{Trainer, python_trainer, wait_for_probe_file, write_script};
use common::{MIB, Sim};
use serde_json::json;
use serve_common::Server;
use serve_common::prometheus::Prometheus;
use serve_common::tls::{Pki, write_private};

const GIB: u64 = 1 << 30;
const UUID: &str = "5ea1c0de-0000-4000-8000-0000000000bb";

#[test]
fn prometheus_scrapes_the_scenario_and_the_probes_figures() {
    let dir = tempfile::tempdir().unwrap();
    let probe_dir = dir.path().join("gpuscope").join("probes");
    let script = dir.path().join("torch.json");
    let alloc =
        json!({"allocated": 4 * GIB, "reserved": 10 * GIB, "inactive_split": GIB, "alloc_retries": 2, "ooms": 0});
    write_script(&script, &json!({"backend": "native", "devices": {"0": {"uuid": UUID, "alloc": alloc}}}));
    let trainer = Trainer::start(&script, &probe_dir, python_trainer(&["--probe"]));
    let pid = trainer.pid_of("main", 1);
    wait_for_probe_file(&probe_dir, pid);
    let sim = Sim::new(&format!(
        "[[gpu]]\nuuid = \"GPU-{UUID}\"\nmemory_total_mib = 81559\nmemory_used_mib = 20000\n\
         [[gpu.process]]\npid = {pid}\nused_mib = 11000\n"
    ));
    let mut cmd = sim.gpuscope();
    cmd.env("GPUSCOPE_PROBE_DIR", &probe_dir);
    let server = Server::start(cmd, &["--listen", "127.0.0.1:0", "--interval", "250ms"]);
    let prometheus = Prometheus::start(dir.path(), server.addr);

    let health = prometheus.until("/api/v1/targets", "a scraped target", |v| {
        let target = &v["data"]["activeTargets"][0];
        target["health"].as_str().filter(|h| *h != "unknown").map(|_| target.clone())
    });
    assert_eq!((&health["health"], &health["lastError"]), (&json!("up"), &json!("")), "{health:#}");
    let used = prometheus.query(&format!("gpuscope_gpu_memory_used_bytes{{uuid=\"GPU-{UUID}\"}}"));
    assert_eq!(used, (20_000 * MIB) as f64);
    let allocated = prometheus.query(&format!("gpuscope_allocator_allocated_bytes{{pid=\"{pid}\",gpu=\"0\"}}"));
    assert_eq!(allocated, (4 * GIB) as f64);
    let retries = prometheus.query(&format!("gpuscope_allocator_alloc_retries_total{{pid=\"{pid}\"}}"));
    assert_eq!(retries, 2.0);
    assert_eq!(prometheus.query(&format!("gpuscope_allocator_fragmentation_ratio{{rank=\"0\",pid=\"{pid}\"}}")), 0.1);

    // Prometheus asked for OpenMetrics and read it as such: the counter's
    // family is named without `_total`, which the 0.0.4 text cannot say.
    let kind = prometheus.until("/api/v1/metadata?metric=gpuscope_nvml_errors", "the counter's metadata", |v| {
        v["data"]["gpuscope_nvml_errors"][0]["type"].as_str().map(String::from)
    });
    assert_eq!(kind, "counter");
}

/// README's scrape config for TLS and a token, as written there but for
/// the paths and the target: Prometheus scrapes through both.
#[test]
fn prometheus_scrapes_over_tls_with_the_readmes_config() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "prom");
    let token = dir.path().join("token");
    write_private(&token, "prometheus-sees-this\n");
    let sim = Sim::new("[[gpu]]\nuuid = \"GPU-7ec5\"\nmemory_total_mib = 1000\nmemory_used_mib = 250\n");
    let (cert, key, token) = (pki.cert.to_str().unwrap(), pki.key.to_str().unwrap(), token.to_str().unwrap());
    let args = ["--listen", "127.0.0.1:0", "--interval", "250ms", "--tls-cert", cert, "--tls-key", key];
    let server = Server::start(sim.gpuscope(), &[&args[..], &["--token-file", token]].concat());

    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let snippet = readme.split("<!-- scrape-config-tls: start -->\n```yaml\n").nth(1).unwrap();
    let snippet = snippet.split("```\n<!-- scrape-config-tls: end -->").next().unwrap();
    let config = snippet
        .replace("/etc/prometheus/gpuscope.token", token)
        .replace("/etc/prometheus/gpuscope-ca.pem", pki.ca.to_str().unwrap())
        .replace("gpu-node-01:10983", &server.addr.to_string());
    assert_ne!(config, snippet, "the README's snippet changed: adapt the replacements");
    let prometheus = Prometheus::with_config(dir.path(), &config);

    let health = prometheus.until("/api/v1/targets", "a scraped target", |v| {
        let target = &v["data"]["activeTargets"][0];
        target["health"].as_str().filter(|h| *h != "unknown").map(|_| target.clone())
    });
    assert_eq!((&health["health"], &health["lastError"]), (&json!("up"), &json!("")), "{health:#}");
    assert_eq!(prometheus.query("gpuscope_gpu_memory_used_bytes{uuid=\"GPU-7ec5\"}"), (250 * MIB) as f64);
}
