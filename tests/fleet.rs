//! `gpuscope fleet` against real `gpuscope serve` instances on the
//! simulated NVML (free ports on loopback), with a two-node DDP job whose
//! ranks' probe files sit on two instances, plus tiny servers of the
//! test's own: one that never answers, one that records what it was sent.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Sim, Sleeper, assert_success, gpuscope};
use serde_json::{Value, json};
use serve_common::Server;
use serve_common::prometheus::Prometheus;
use serve_common::tls::write_private;

const GIB: u64 = 1 << 30;
const JOB: &str = "10.1.2.3:29500";

/// GPUs `uuids`, with process `pids[i]` on GPU i.
fn scenario(uuids: &[&str], pids: &[u32]) -> String {
    let mut s = String::new();
    for (i, uuid) in uuids.iter().enumerate() {
        s.push_str(&format!(
            "[[gpu]]\nname = \"NVIDIA H100 80GB HBM3\"\nuuid = \"GPU-{uuid}\"\nmemory_total_mib = 81559\n\
             utilization_gpu = {}\n",
            90 - 30 * i
        ));
        if let Some(pid) = pids.get(i) {
            s.push_str(&format!(
                "[[gpu.process]]\npid = {pid}\nused_mib = {}\nsm_util = {}\n",
                (20 + 10 * i) * 1024,
                85 - 30 * i
            ));
        }
    }
    s
}

fn start_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat[stat.rfind(')').unwrap() + 1..].split_whitespace().nth(19).unwrap().parse().unwrap()
}

/// A probe file for `pid` as rank `rank` of JOB (world size 4) on GPU `uuid`.
fn place_rank(sim: &Sim, pid: u32, rank: u32, uuid: &str) {
    let dir = sim.probe_dir();
    std::fs::create_dir_all(&dir).unwrap();
    for d in [dir.parent().unwrap(), dir.as_path()] {
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    }
    let device = json!({"index": 0, "uuid": uuid, "pci_bus_id": null, "private_pools_reserved": null,
        "allocated": (4 + u64::from(rank)) * GIB, "allocated_peak": 6 * GIB, "reserved": 10 * GIB,
        "reserved_peak": 11 * GIB, "active": 4 * GIB, "active_peak": 6 * GIB, "inactive_split": GIB,
        "inactive_split_peak": GIB, "requested": 4 * GIB, "requested_peak": 6 * GIB, "segments": 40,
        "alloc_retries": 0, "ooms": 0, "device_allocs": 50, "device_frees": 10, "largest_free_block": null,
        "bytes_limit": null});
    let file = json!({
        "format": "gpuscope-probe", "version": 1, "pid": pid, "start_ticks": start_ticks(pid), "seq": 1,
        "written_unix_ms": 1_795_289_400_123u64, "interval_s": 1.0, "errors": 0, "framework": "torch",
        "framework_version": "2.5.1", "backend": "native", "alloc_conf": null,
        "alloc_conf_var": "PYTORCH_CUDA_ALLOC_CONF", "alloc_conf_source": "environment",
        "alloc_conf_env": {"PYTORCH_ALLOC_CONF": null, "PYTORCH_CUDA_ALLOC_CONF": null},
        "expandable_segments": false, "cuda_visible_devices": null, "cuda_device_order": null, "oom_events": 0,
        "job": JOB, "rank": rank, "local_rank": rank % 2, "world_size": 4, "pinned_host": null,
        "devices": [device]
    });
    let name = format!("{pid}-{}.json", file["start_ticks"]);
    let aside = sim.dir.path().join(&name);
    std::fs::write(&aside, file.to_string()).unwrap();
    std::fs::rename(aside, dir.join(name)).unwrap();
}

/// A node of the fleet: its simulator, the processes it lists, its server.
struct Node {
    sim: Sim,
    _procs: Vec<Sleeper>,
    server: Server,
}

impl Node {
    /// `ranks[i]` is the rank of the process on GPU i (`None`: no probe).
    fn start(uuids: &[&str], ranks: &[Option<u32>]) -> Self {
        let procs: Vec<Sleeper> = ranks.iter().map(|_| Sleeper::spawn(&["120"])).collect();
        let pids: Vec<u32> = procs.iter().map(Sleeper::pid).collect();
        let sim = Sim::new(&scenario(uuids, &pids));
        for ((pid, rank), uuid) in pids.iter().zip(ranks).zip(uuids) {
            if let Some(rank) = rank {
                place_rank(&sim, *pid, *rank, uuid);
            }
        }
        let server = Server::start(sim.gpuscope(), &["--listen", "127.0.0.1:0", "--interval", "200ms"]);
        Self { sim, _procs: procs, server }
    }

    fn addr(&self) -> String {
        self.server.addr.to_string()
    }
}

/// Node A: ranks 0 and 1; node B: rank 2 (rank 3 of 4 runs nowhere).
fn two_nodes() -> [Node; 2] {
    [
        Node::start(
            &["a0000000-0000-4000-8000-000000000000", "a1000000-0000-4000-8000-000000000000"],
            &[Some(0), Some(1)],
        ),
        Node::start(&["b0000000-0000-4000-8000-000000000000"], &[Some(2)]),
    ]
}

/// Node A: ranks 0 and 1; node B: rank 2 (rank 3 of 4 runs nowhere); node C: no job.
fn three_nodes() -> [Node; 3] {
    [
        Node::start(
            &["a0000000-0000-4000-8000-000000000000", "a1000000-0000-4000-8000-000000000000"],
            &[Some(0), Some(1)],
        ),
        Node::start(
            &["b0000000-0000-4000-8000-000000000000", "b1000000-0000-4000-8000-000000000000"],
            &[Some(2), None],
        ),
        Node::start(&["c0000000-0000-4000-8000-000000000000"], &[None]),
    ]
}

/// The fleet's JSON, whatever its hosts' state: exit 1 (some down or
/// stale) and 3 (none answering) still write it, and a poll that waits
/// for nodes to come up sees those first.
fn fleet_json(hosts: &str, extra: &[&str]) -> Value {
    let out = gpuscope().args(["fleet", hosts, "--json", "--timeout", "10s"]).args(extra).output().unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1 | 3)), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Until the servers' first snapshots (with the probes read) are served.
fn until_job_seen(hosts: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = fleet_json(hosts, &[]);
        if v["jobs"].as_array().unwrap().iter().any(|j| j["ranks"].as_array().unwrap().len() == 3) {
            return v;
        }
        assert!(Instant::now() < deadline, "never saw the three ranks: {v:#}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn ranks_on_two_nodes_are_one_job_in_json_and_table() {
    let nodes = three_nodes();
    let hosts: Vec<String> = nodes.iter().map(Node::addr).collect();
    let list = hosts.join(",");
    let v = until_job_seen(&list);
    let states: Vec<&str> = v["hosts"].as_array().unwrap().iter().map(|h| h["status"].as_str().unwrap()).collect();
    assert_eq!(states, ["ok", "ok", "ok"], "{v:#}");
    assert_eq!(v["hosts"][2]["snapshot"]["gpus"].as_array().unwrap().len(), 1);
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "{jobs:#?}");
    let job = &jobs[0];
    assert_eq!((job["job"].as_str(), job["world_size"].as_u64()), (Some(JOB), Some(4)));
    let ranks: Vec<(u64, &str)> = job["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["rank"].as_u64().unwrap(), r["host"].as_str().unwrap()))
        .collect();
    assert_eq!(ranks, [(0, hosts[0].as_str()), (1, hosts[0].as_str()), (2, hosts[1].as_str())]);
    assert_eq!(job["missing_ranks"], json!([3]));
    assert_eq!(job["ranks"][2]["allocated"], 6 * GIB);
    // SM shares 85, 55 (node A) and 85 (node B): rank 1 is the slowest;
    // rank 1's GPU holds 30 of 80 GiB, the most.
    assert_eq!((job["slowest_rank"].as_u64(), job["fullest_rank"].as_u64()), (Some(1), Some(1)));

    let out = gpuscope().args(["fleet", &list, "-1"]).output().unwrap();
    // 1 where a node, slowed by a loaded machine, reads stale this once.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.is_ascii(), "{text}");
    assert!(text.lines().all(|l| l.len() <= 80), "within 80 columns:\n{text}");
    assert!(text.contains(&format!("job {JOB}  world 4  on 2 host(s)  rank 3 of 4 not seen")), "{text}");
    for host in &hosts {
        assert!(text.lines().any(|l| l.starts_with(host.as_str()) && l.contains(" ok ")), "{host}:\n{text}");
    }
    let rank_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("  ") && l.contains("127.0.0.1")).collect();
    assert_eq!(rank_lines.len(), 3, "{text}");
    assert!(rank_lines[1].ends_with("slowest,fullest"), "{text}");
}

/// `fleet --json --watch`, read a line at a time.
struct Stream {
    child: Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Stream {
    fn start(hosts: &str, timeout: &str) -> Self {
        let mut child = gpuscope()
            .args(["fleet", hosts, "--json", "--watch", "--interval", "200ms", "--timeout", timeout])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Self { child, lines }
    }

    fn until(&mut self, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let line = self.lines.next().unwrap().unwrap();
            let v: Value = serde_json::from_str(&line).unwrap();
            if ok(&v) {
                return v;
            }
            assert!(Instant::now() < deadline, "never saw {what}; last: {v:#}");
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn status(v: &Value, i: usize) -> &str {
    v["hosts"][i]["status"].as_str().unwrap()
}

#[test]
fn a_killed_node_is_stale_with_its_age_and_returns() {
    let a = Node::start(&["a0000000-0000-4000-8000-000000000000"], &[None]);
    let b = Node::start(&["b0000000-0000-4000-8000-000000000000"], &[None]);
    let port = a.server.addr.port();
    let mut stream = Stream::start(&format!("{},{}", a.addr(), b.addr()), "2s");
    stream.until("both up", |v| status(v, 0) == "ok" && status(v, 1) == "ok");
    let Node { sim, server, _procs } = a;
    drop(server);
    // Stale from a failed attempt, not merely from a late answer on a busy machine.
    let failed = |v: &Value| status(v, 0) == "stale" && v["hosts"][0]["error"].is_string();
    let v = stream.until("node A stale after a failure", failed);
    assert!(v["hosts"][0]["age_ms"].as_u64() > Some(0), "{v:#}");
    assert!(v["hosts"][0]["failing_since_unix_ms"].is_u64());
    assert!(v["hosts"][0]["snapshot"]["gpus"].is_array(), "the last snapshot is kept: {v:#}");
    assert_eq!(v["hosts"][1]["error"], Value::Null, "the other node is unaffected: {v:#}");
    let again = format!("127.0.0.1:{port}");
    let _back = Server::start(sim.gpuscope(), &["--listen", &again, "--interval", "200ms"]);
    let v = stream.until("node A back", |v| status(v, 0) == "ok");
    assert_eq!(v["hosts"][0]["error"], Value::Null);
    assert_eq!(v["hosts"][0]["failing_since_unix_ms"], Value::Null);
}

/// A server that takes connections and answers each with `answer`, a
/// status line and a body (after reading the request, which it keeps):
/// `None` never answers at all.
struct TinyServer {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
}

impl TinyServer {
    fn start(answer: Option<(&'static str, Vec<u8>)>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let answer = answer.map(Arc::new);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let (seen, answer) = (seen.clone(), answer.clone());
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    let n = conn.read(&mut buf).unwrap_or(0);
                    seen.lock().unwrap().push(String::from_utf8_lossy(&buf[..n]).into_owned());
                    match answer.as_deref() {
                        Some((status, body)) => {
                            let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n", body.len());
                            let _ = conn.write_all(head.as_bytes());
                            let _ = conn.write_all(body);
                        }
                        // Holds the connection open, answering nothing.
                        None => std::thread::sleep(Duration::from_secs(120)),
                    }
                });
            }
        });
        Self { addr, requests }
    }

    fn refusing(body: &str) -> Self {
        Self::start(Some(("401 Unauthorized", body.as_bytes().to_vec())))
    }
}

#[test]
fn a_silent_node_does_not_hold_back_the_others() {
    let fast = Node::start(&["a0000000-0000-4000-8000-000000000000"], &[None]);
    let silent = TinyServer::start(None);
    let started = Instant::now();
    let mut stream = Stream::start(&format!("{},{}", silent.addr, fast.addr()), "3s");
    // The first line waits for the first round, up to --timeout, as a
    // one-shot does: never a line of hosts all `waiting`.
    let v = stream.until("the first line", |_| true);
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    assert_eq!(status(&v, 1), "ok", "the fast node is in the first line: {v:#}");
    assert_eq!((status(&v, 0), v["hosts"][0]["error"].as_str()), ("unreachable", Some("no answer within 3s")));
    assert_eq!(v["hosts"][0]["snapshot"], Value::Null);
    // The lines after it come every interval, the silent node's attempt
    // still pending or failed, never holding back the fast one.
    let v = stream.until("a second line", |_| true);
    assert_eq!(status(&v, 1), "ok", "{v:#}");
    assert!(!silent.requests.lock().unwrap().is_empty(), "it was asked");
}

/// One-shots say how many hosts answered: 0 all, 1 some (down or
/// stale), 3 none; 2 stays bad usage.
#[test]
fn the_exit_status_says_how_many_hosts_answered() {
    let node = Node::start(&["a0000000-0000-4000-8000-000000000000"], &[None]);
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let up = || loop {
        if status(&fleet_json(&node.addr(), &[]), 0) == "ok" {
            return;
        }
    };
    up();
    for mode in ["--json", "-1"] {
        for (hosts, want) in [(node.addr(), 0), (format!("{},{closed}", node.addr()), 1), (closed.clone(), 3)] {
            let out = gpuscope().args(["fleet", &hosts, mode, "--timeout", "10s"]).output().unwrap();
            assert_eq!(out.status.code(), Some(want), "{mode} {hosts}: {out:?}");
            assert!(!out.stdout.is_empty(), "the output is written whatever the status");
        }
    }
}

/// A host named twice was always `waiting` (its answer went to its
/// twin) and the one-shot waited out the timeout; now it is read once.
#[test]
fn a_host_named_twice_is_read_once_and_said_so() {
    let node = Node::start(&["a0000000-0000-4000-8000-000000000000"], &[None]);
    let (addr, port) = (node.addr(), node.server.addr.port());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hosts");
    std::fs::write(&file, format!("{addr}\nhttp://127.0.0.1:{port}/\n")).unwrap();
    let started = Instant::now();
    let out = gpuscope()
        .args(["fleet", &addr, "--hosts-file", file.to_str().unwrap(), "--json", "--timeout", "20s"])
        .output()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(15), "waited out the timeout: {:?}", started.elapsed());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["hosts"].as_array().unwrap().len(), 1, "{v:#}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err, format!("gpuscope: note: {addr} is listed more than once: it is read once\n"));
}

/// The QA's hung node: its serve answers /snapshot 200 with the last
/// snapshot, older every second, while its /healthz says 503. The fleet
/// says stale and why, from the node's own figure (no clock compared).
#[test]
fn a_node_whose_driver_hung_is_stale_with_the_reason() {
    let sim = Sim::new("hang_after_s = 0.5\n[[gpu]]\nuuid = \"GPU-a0000000-0000-4000-8000-000000000000\"\n");
    let server = Server::start(sim.gpuscope(), &["--listen", "127.0.0.1:0", "--interval", "200ms"]);
    let hosts = server.addr.to_string();
    let deadline = Instant::now() + Duration::from_secs(40);
    let (v, out) = loop {
        let out = gpuscope().args(["fleet", &hosts, "--json", "--interval", "500ms", "--timeout", "5s"]).output();
        let out = out.unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        if status(&v, 0) == "stale" {
            break (v, out);
        }
        assert!(Instant::now() < deadline, "never stale: {v:#}");
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(out.status.code(), Some(3), "no host with a current snapshot");
    let h = &v["hosts"][0];
    assert!(h["age_ms"].as_u64() > Some(1500), "the snapshot's age, not the answer's: {h:#}");
    assert!(h["snapshot"]["gpus"].is_array(), "the last figures are kept");
    let why = h["error"].as_str().unwrap();
    assert!(why.contains("old: the node answers, but its collection has stopped"), "{why}");
    let out = gpuscope().args(["fleet", &hosts, "-1", "--interval", "500ms", "--timeout", "5s"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().any(|l| l.starts_with(&hosts) && l.contains(" stale ")), "{text}");
    assert!(text.contains("its collection has stopped"), "{text}");
}

/// What a node's answer other than a snapshot means, and what a hosts
/// file or URL cannot say.
#[test]
fn errors_say_what_they_mean() {
    let not_found = TinyServer::start(Some(("404 Not Found", Vec::new())));
    let redirect = TinyServer::start(Some(("302 Found\r\nLocation: https://login.example/", Vec::new())));
    let out = gpuscope()
        .args(["fleet", &format!("{},{}", not_found.addr, redirect.addr), "--json", "--timeout", "10s"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["hosts"][0]["error"], "HTTP 404: not a gpuscope serve? /snapshot answered 404");
    assert_eq!(
        v["hosts"][1]["error"],
        "HTTP 302: a redirect to https://login.example/, not followed: name the host that serves /snapshot itself"
    );
    assert_eq!(redirect.requests.lock().unwrap().len(), 1, "not followed");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hosts");
    std::fs::write(&file, "node1:1 node2:2\n").unwrap();
    let out = gpuscope().args(["fleet", "--hosts-file", file.to_str().unwrap(), "-1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 1: \"node1:1 node2:2\": one host per line"));
    let out = gpuscope().args(["fleet", "http://node1:18801/gpuscope", "-1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("a path is not taken: HOST:PORT or https://HOST:PORT only"), "{err}");
}

/// As serve refuses it: a token file group or others may read.
#[test]
fn a_world_readable_token_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret-token\n").unwrap();
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let out = gpuscope().args(["fleet", "127.0.0.1:9", "-1", "--token-file"]).arg(&token).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("--token-file") && err.contains("mode 0644") && err.contains("chmod 600"), "{err}");
}

/// The hostile node: a valid snapshot of 20,000 idle GPUs and
/// 50,000 processes, all on the last GPU (so that a search of the
/// processes for each GPU goes through them all), a few MB, built on a
/// real node's snapshot.
fn hostile_snapshot(real: &Value) -> Vec<u8> {
    let mut snap = real.clone();
    let gpu = |i: u32| {
        json!({"index": i, "state": "ok", "memory": {"used": GIB, "total": 80 * GIB},
        "utilization": {"gpu": 0}, "clocks": {}, "pcie": {}})
    };
    let process = |p: u32| json!({"pid": 100_000 + p, "gpus": [{"index": 19_999, "type": "compute"}]});
    snap["gpus"] = (0..20_000).map(gpu).collect();
    snap["processes"] = (0..50_000).map(process).collect();
    serde_json::to_vec(&snap).unwrap()
}

/// Summing such a node up on every frame was GPUs x processes (10^9 steps:
/// seconds in a release build, minutes in this debug one) and held back
/// every other host; now it is cut to the caps, summed once, and says so.
#[test]
fn a_hostile_node_s_huge_snapshot_is_capped_and_the_others_are_read() {
    let good = Node::start(&["a0000000-0000-4000-8000-000000000000"], &[None]);
    let real = loop {
        let v = fleet_json(&good.addr(), &[]);
        if status(&v, 0) == "ok" {
            break v["hosts"][0]["snapshot"].clone();
        }
    };
    let body = hostile_snapshot(&real);
    assert!(body.len() < 16 << 20, "within the body cap: {} bytes", body.len());
    let hostile = TinyServer::start(Some(("200 OK", body)));
    let list = format!("{},{}", good.addr(), hostile.addr);

    let v = fleet_json(&list, &[]);
    assert_eq!((status(&v, 0), status(&v, 1)), ("ok", "ok"), "{:#}", v["hosts"][0]);
    assert_eq!(v["hosts"][1]["capped"], json!({"gpus_sent": 20_000, "processes_sent": 50_000, "alerts_sent": 0}));
    assert_eq!(v["hosts"][0]["capped"], Value::Null, "the real node is whole");
    let snap = &v["hosts"][1]["snapshot"];
    assert_eq!((snap["gpus"].as_array().unwrap().len(), snap["processes"].as_array().unwrap().len()), (1024, 16_384));

    let out = gpuscope().args(["fleet", &list, "-1", "--timeout", "10s"]).output().unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let hostile_line = text.lines().find(|l| l.starts_with(&hostile.addr.to_string())).unwrap();
    assert!(hostile_line.contains(" ok ") && hostile_line.contains("0/1024"), "{text}");
    assert!(text.contains("  capped: kept 1024 of 20000 GPUs, 16384 of 50000 processes\n"), "{text}");
    assert!(text.lines().any(|l| l.starts_with(good.addr().as_str()) && l.contains(" ok ")), "{text}");
}

#[test]
fn the_token_is_sent_and_a_refusal_is_reported() {
    let server = TinyServer::refusing("no token, no snapshot\n");
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    write_private(&token, "s3cret-token\n");
    let out = gpuscope()
        .args(["fleet", &server.addr.to_string(), "--json", "--timeout", "10s", "--token-file"])
        .arg(&token)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "no host answered");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "loopback: no clear-text warning");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["hosts"][0]["status"], "unreachable");
    assert_eq!(v["hosts"][0]["error"], "HTTP 401: no token, no snapshot");
    let request = server.requests.lock().unwrap()[0].to_ascii_lowercase();
    assert!(request.starts_with("get /snapshot http/1.1\r\n"), "{request}");
    assert!(request.contains("authorization: bearer s3cret-token\r\n"), "{request}");
}

/// As `serve` warns of a token over plain HTTP beyond loopback, so does
/// the fleet that sends it: once a host, however often it is named.
#[test]
fn a_token_for_a_plain_http_host_beyond_loopback_is_warned_of_once() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    write_private(&token, "s3cret-token\n");
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    // TEST-NET-1 (RFC 5737): routed nowhere, so the attempt only times out.
    let hosts = format!("192.0.2.1:9,{closed},http://192.0.2.1:9");
    let out = gpuscope().args(["fleet", &hosts, "-1", "--timeout", "1s", "--token-file"]).arg(&token).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "no host answered");
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err,
        "gpuscope: note: 192.0.2.1:9 is listed more than once: it is read once\n\
         gpuscope: warning: 192.0.2.1:9 is not a loopback address and speaks plain HTTP: the token \
         (--token-file) and the answers cross the network in clear text; use https://192.0.2.1:9 with --ca\n"
    );
    let out = gpuscope().args(["fleet", "192.0.2.1:9", "-1", "--timeout", "1s"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "no token, nothing to warn of");
}

#[test]
fn a_bad_hosts_file_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hosts");
    std::fs::write(&file, "# nodes\nnode1\nnode2:99999\n").unwrap();
    let out = gpuscope().args(["fleet", "--hosts-file", file.to_str().unwrap(), "-1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("hosts, line 3: \"node2:99999\": \"99999\" is not a port"), "{err}");
}

/// `tmux -S SOCKET ARGS` on a server of this test's own.
fn tmux(socket: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("tmux").arg("-S").arg(socket).args(args).output().unwrap();
    assert!(out.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn pane_until(socket: &Path, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let screen = tmux(socket, &["capture-pane", "-p"]);
        if ok(&screen) {
            return screen;
        }
        assert!(Instant::now() < deadline, "the pane never showed {what}:\n{screen}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct KillServer(PathBuf);

impl Drop for KillServer {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux").arg("-S").arg(&self.0).arg("kill-server").output();
    }
}

#[test]
fn the_fleet_view_in_a_real_terminal() {
    let nodes = two_nodes();
    let list = format!("{},{}", nodes[0].addr(), nodes[1].addr());
    // The socket in a directory of the test's own (tmux 3.3 leaves a killed
    // server's socket behind); the server is killed before it goes.
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("tmux");
    let _server = KillServer(socket.clone());
    tmux(&socket, &["-f", "/dev/null", "new-session", "-d", "-x", "100", "-y", "30", "bash", "--norc", "--noprofile"]);
    let bin = assert_cmd::cargo::cargo_bin("gpuscope");
    let cmd =
        format!("clear; echo before-fleet; LANG=C.UTF-8 XDG_CONFIG_HOME=/nonexistent '{}' fleet {list}", bin.display());
    tmux(&socket, &["send-keys", "-l", &cmd]);
    tmux(&socket, &["send-keys", "Enter"]);
    let first = nodes[0].addr();
    pane_until(&socket, "both hosts answering", |s| s.contains("2 hosts, 2 answering") && s.contains(&first));
    tmux(&socket, &["send-keys", "Enter"]);
    // A frame reaches the pane in several writes: the fleet line is read
    // once it is there up to its last words, not from a frame half drawn.
    let host =
        pane_until(&socket, "the first host expanded", |s| s.contains("Processes") && s.contains("back to the fleet"));
    assert!(host.contains(&format!("fleet: {first} (ok)")), "{host}");
    tmux(&socket, &["send-keys", "Escape"]);
    pane_until(&socket, "the host list again", |s| s.contains("Enter host"));
    tmux(&socket, &["send-keys", "J"]);
    let jobs = pane_until(&socket, "the job view", |s| s.contains(&format!("job {JOB}")));
    assert!(jobs.contains("ranks 3 of 4 not seen") || jobs.contains("rank 3 of 4 not seen"), "{jobs}");
    tmux(&socket, &["send-keys", "q"]);
    pane_until(&socket, "the shell again", |s| s.contains("before-fleet") && !s.contains("gpuscope fleet ("));
    tmux(&socket, &["send-keys", "-l", "clear; stty -a; echo stty-done"]);
    tmux(&socket, &["send-keys", "Enter"]);
    let screen = pane_until(&socket, "stty's report", |s| s.lines().any(|l| l.trim() == "stty-done"));
    let flags: Vec<&str> = screen.split_whitespace().collect();
    for good in ["icanon", "echo", "isig"] {
        assert!(flags.contains(&good), "{good} is off after q:\n{screen}");
    }
}

/// `fleet --prometheus URL --json`, once.
fn fleet_prometheus(url: &str) -> Value {
    let out = gpuscope().args(["fleet", "--prometheus", url, "--json", "--timeout", "10s"]).output().unwrap();
    // 0, 1 or 3 by how many hosts answer (`fleet_exit_status`).
    assert!([Some(0), Some(1), Some(3)].contains(&out.status.code()), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn from_prometheus_two_instances_with_their_gpus_and_the_job_across_them() {
    let nodes = two_nodes();
    let dir = tempfile::tempdir().unwrap();
    let targets = format!("'{}', '{}'", nodes[0].addr(), nodes[1].addr());
    let config =
        format!("scrape_configs:\n  - job_name: gpuscope\n    static_configs:\n      - targets: [{targets}]\n");
    let prometheus = Prometheus::with_config(dir.path(), &config);
    let url = format!("http://{}", prometheus.addr);
    let deadline = Instant::now() + Duration::from_secs(60);
    let v = loop {
        let v = fleet_prometheus(&url);
        if v["jobs"].as_array().unwrap().iter().any(|j| j["ranks"].as_array().unwrap().len() == 3) {
            break v;
        }
        assert!(Instant::now() < deadline, "never saw the three ranks: {v:#}");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(v["source"], "prometheus");
    let hosts: Vec<&str> = v["hosts"].as_array().unwrap().iter().map(|h| h["host"].as_str().unwrap()).collect();
    let host = |node: &Node| v["hosts"].as_array().unwrap().iter().find(|h| h["host"] == node.addr().as_str());
    let (a, b) = (&host(&nodes[0]).unwrap()["snapshot"], &host(&nodes[1]).unwrap()["snapshot"]);
    assert_eq!(hosts.len(), 2, "Prometheus's instances: {v:#}");
    assert_eq!(a["gpus"].as_array().unwrap().len(), 2, "{v:#}");
    assert_eq!(a["gpus"][0]["uuid"], "GPU-a0000000-0000-4000-8000-000000000000");
    assert_eq!(a["gpus"][0]["name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(a["gpus"][0]["memory"]["total"], 81559u64 << 20);
    assert_eq!(a["gpus"][0]["utilization"]["gpu"], 90);
    assert_eq!(a["processes"].as_array().unwrap().len(), 2, "{v:#}");
    // What Prometheus does not hold is null, never 0.
    assert_eq!((&a["host"]["hostname"], &a["processes"][0]["start_time"]), (&Value::Null, &Value::Null));
    assert_eq!(b["gpus"].as_array().unwrap().len(), 1);
    let job = &v["jobs"][0];
    assert_eq!((job["job"].as_str(), job["world_size"].as_u64()), (Some(JOB), Some(4)), "{job:#}");
    let ranks: Vec<(u64, &str)> = job["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["rank"].as_u64().unwrap(), r["host"].as_str().unwrap()))
        .collect();
    let (a_name, b_name) = (nodes[0].addr(), nodes[1].addr());
    assert_eq!(ranks, [(0, a_name.as_str()), (1, a_name.as_str()), (2, b_name.as_str())]);
    assert_eq!((&job["missing_ranks"], &job["ranks"][2]["allocated"]), (&json!([3]), &json!(6 * GIB)));
}

#[test]
fn a_prometheus_that_is_down_or_refuses_is_every_host_s_error() {
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let v = fleet_prometheus(&format!("http://{closed}"));
    assert_eq!(v["hosts"].as_array().unwrap().len(), 1, "{v:#}");
    assert_eq!(v["hosts"][0]["status"], "unreachable");
    assert!(v["hosts"][0]["error"].as_str().unwrap().starts_with("Prometheus: cannot connect"), "{v:#}");
    let refusing = TinyServer::refusing("no token\n");
    let v = fleet_prometheus(&format!("http://{}", refusing.addr));
    assert_eq!(v["hosts"][0]["error"], "Prometheus: HTTP 401: no token", "{v:#}");
    let request = refusing.requests.lock().unwrap()[0].clone();
    assert!(request.starts_with("GET /api/v1/query?query="), "{request}");
}

/// The Prometheus answer: 100,000 allocator series of one process
/// (about 12 MB), each on a GPU of its own. Looking each series' device up
/// in the process's list was 15-17 s in a release build (minutes in this
/// debug one) and ignored the timeout; now it is one pass.
#[test]
fn a_prometheus_answer_of_100000_series_for_one_process_is_read_in_one_pass() {
    let result: Vec<Value> = (0..100_000)
        .map(|gpu| {
            json!({"metric": {"__name__": "gpuscope_allocator_allocated_bytes", "instance": "node-a:10983",
                "pid": "4242", "gpu": gpu.to_string()}, "value": [1_700_000_000.5, "1"]})
        })
        .collect();
    let body = serde_json::to_vec(&json!({"status": "success", "data": {"resultType": "vector", "result": result}}));
    let body = body.unwrap();
    assert!(body.len() < 16 << 20, "within the answer cap: {} bytes", body.len());
    let prometheus = TinyServer::start(Some(("200 OK", body)));
    let url = format!("http://{}", prometheus.addr);
    let v = fleet_prometheus(&url);
    assert_eq!(v["hosts"].as_array().unwrap().len(), 1, "{:#}", v["hosts"][0]["error"]);
    assert_eq!((v["hosts"][0]["host"].as_str(), status(&v, 0)), (Some("node-a:10983"), "ok"));
    let devices = &v["hosts"][0]["snapshot"]["processes"][0]["allocator"]["devices"];
    assert_eq!(devices.as_array().unwrap().len(), 1024, "cut to the GPU cap");
    let out = gpuscope().args(["fleet", "--prometheus", &url, "-1", "--timeout", "10s"]).output().unwrap();
    assert_success(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().any(|l| l.starts_with("node-a:10983") && l.contains(" ok ")), "{text}");
}
