//! A real Prometheus (Debian's package) scrapes `gpuscope serve` on the
//! simulated NVML, with a probed pretend trainer, and PromQL gets the
//! scenario's figures back.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_common;

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::trainer::{Trainer, python_trainer, wait_for_probe_file, write_script};
use common::{MIB, Sim};
use serde_json::{Value, json};
use serve_common::tls::{Pki, write_private};
use serve_common::{Server, get, require};

const GIB: u64 = 1 << 30;
const UUID: &str = "5ea1c0de-0000-4000-8000-0000000000bb";

struct Prometheus {
    child: Child,
    addr: SocketAddr,
    log: std::path::PathBuf,
}

impl Prometheus {
    fn start(dir: &std::path::Path, target: SocketAddr) -> Self {
        let scrape =
            format!("scrape_configs:\n  - job_name: gpuscope\n    static_configs:\n      - targets: ['{target}']\n");
        Self::with_config(dir, &scrape)
    }

    /// Prometheus with `scrape_configs` (scraping every second).
    fn with_config(dir: &std::path::Path, scrape_configs: &str) -> Self {
        let binary = require("prometheus");
        let config = dir.join("prometheus.yml");
        std::fs::write(&config, format!("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n{scrape_configs}"))
            .unwrap();
        // A port that was free a moment ago: Prometheus cannot report the
        // one it picked, so it cannot be given port 0.
        let addr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let log = dir.join("prometheus.log");
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Self { child, addr, log }
    }

    /// Polls the HTTP API until `found` extracts an answer (at most 30 s).
    fn until<T>(&self, path: &str, what: &str, found: impl Fn(&Value) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let answer = std::net::TcpStream::connect(self.addr).ok().map(|_| get(self.addr, path, None));
            let json = answer.filter(|r| r.status == 200).and_then(|r| serde_json::from_str::<Value>(&r.body).ok());
            if let Some(t) = json.as_ref().and_then(&found) {
                return t;
            }
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            assert!(Instant::now() < deadline, "Prometheus never gave {what}: {json:?}\nits log:\n{log}");
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn query(&self, promql: &str) -> f64 {
        let path = format!("/api/v1/query?query={}", percent_encode(promql));
        self.until(&path, promql, |v| v["data"]["result"][0]["value"][1].as_str()?.parse().ok())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

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
        .replace("gpu-node-01:9835", &server.addr.to_string());
    assert_ne!(config, snippet, "the README's snippet changed: adapt the replacements");
    let prometheus = Prometheus::with_config(dir.path(), &config);

    let health = prometheus.until("/api/v1/targets", "a scraped target", |v| {
        let target = &v["data"]["activeTargets"][0];
        target["health"].as_str().filter(|h| *h != "unknown").map(|_| target.clone())
    });
    assert_eq!((&health["health"], &health["lastError"]), (&json!("up"), &json!("")), "{health:#}");
    assert_eq!(prometheus.query("gpuscope_gpu_memory_used_bytes{uuid=\"GPU-7ec5\"}"), (250 * MIB) as f64);
}
