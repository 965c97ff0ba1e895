//! A real Prometheus (Debian's package) for the tests: started on a free
//! port with a scrape config of the test's, asked over its HTTP API.

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{get, require};

pub struct Prometheus {
    child: Child,
    pub addr: SocketAddr,
    log: std::path::PathBuf,
}

impl Prometheus {
    pub fn start(dir: &std::path::Path, target: SocketAddr) -> Self {
        let scrape =
            format!("scrape_configs:\n  - job_name: gpuscope\n    static_configs:\n      - targets: ['{target}']\n");
        Self::with_config(dir, &scrape)
    }

    /// Prometheus with `scrape_configs` (scraping every second).
    pub fn with_config(dir: &std::path::Path, scrape_configs: &str) -> Self {
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
    pub fn until<T>(&self, path: &str, what: &str, found: impl Fn(&Value) -> Option<T>) -> T {
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

    pub fn query(&self, promql: &str) -> f64 {
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

pub fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
