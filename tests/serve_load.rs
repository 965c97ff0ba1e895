//! A burst of concurrent scrapes on loopback: all answered, none failed.
//! Latencies are printed (`--nocapture`), not asserted: this machine's
//! load is not the test's to control.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_common;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::{Sim, Sleeper};
use serve_common::{Server, get};

const SCRAPES: usize = 200;

#[test]
fn two_hundred_concurrent_scrapes_are_all_answered() {
    let sleepers: Vec<Sleeper> = (0..16).map(|_| Sleeper::spawn(&["120"])).collect();
    let mut scenario = String::new();
    for gpu in 0..4 {
        scenario.push_str("[[gpu]]\nmemory_total_mib = 81559\nutilization_gpu = 90\n");
        for s in sleepers.iter().skip(gpu).step_by(4) {
            scenario.push_str(&format!("[[gpu.process]]\npid = {}\nused_mib = 8000\n", s.pid()));
        }
    }
    let sim = Sim::new(&scenario);
    let server = Server::start(sim.gpuscope(), &["--listen", "127.0.0.1:0", "--interval", "200ms"]);
    let last_pid = format!("pid=\"{}\"", sleepers[15].pid());
    server.until("/metrics", "every process", |r| r.body.contains(&last_pid));

    let start = Arc::new(Barrier::new(SCRAPES));
    let addr = server.addr;
    let scrapers: Vec<_> = (0..SCRAPES)
        .map(|_| {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                let t = Instant::now();
                let r = get(addr, "/metrics", None);
                (r.status, r.body.ends_with("\n") && r.body.contains("gpuscope_build_info"), t.elapsed())
            })
        })
        .collect();
    let mut latencies: Vec<Duration> = Vec::with_capacity(SCRAPES);
    for s in scrapers {
        let (status, complete, took) = s.join().expect("a scrape failed");
        assert_eq!(status, 200);
        assert!(complete, "a truncated body");
        latencies.push(took);
    }
    latencies.sort();
    let (median, worst) = (latencies[SCRAPES / 2], latencies[SCRAPES - 1]);
    println!("{SCRAPES} concurrent scrapes: median {median:.1?}, worst {worst:.1?}");
    let health = server.get("/healthz");
    assert_eq!(health.status, 200, "still healthy after the burst: {}", health.body);
}
