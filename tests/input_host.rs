//! What the host sees of a job's input side, end to end through the real
//! binary and the simulated NVML: the PCIe link and its replay counter per
//! GPU, and a trainer's DataLoader workers (a real child named
//! `pt_data_worker`, as PyTorch 2.5+ names them) with their CPU and state.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use common::{Sim, assert_valid, calls_to};
use serde_json::{Value, json};

fn documents(text: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(text).into_iter::<Value>().map(Result::unwrap).collect()
}

/// `--json --watch` for `count` ticks `interval` apart.
fn watch(sim: &Sim, interval: &str, count: &str) -> Vec<Value> {
    let out = sim.gpuscope().args(["--json", "--watch", "--interval", interval, "--count", count]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let docs = documents(&String::from_utf8(out.stdout).unwrap());
    for d in &docs {
        assert_valid(d);
    }
    docs
}

#[test]
fn the_pcie_link_and_its_replays_come_from_the_driver() {
    // GPU 0: trained down to Gen3 x8, retrying 100 transfers a second;
    // GPU 1: a board that keeps no replay counter; GPU 2: no PCIe readings.
    let (sim, log) = Sim::logged(
        "[[gpu]]\npcie_link_gen_current = 3\npcie_link_width_current = 8\n\
         pcie_replay_counter = 40\npcie_replays_per_s = 100\n\
         [[gpu]]\nunsupported = [\"pcie_replay\"]\n\
         [[gpu]]\nunsupported = [\"pcie\"]\n",
    );
    let docs = watch(&sim, "300ms", "3");
    assert_eq!(docs.len(), 3);
    let link = |d: usize, g: usize| docs[d]["gpus"][g]["pcie_link"].clone();
    let first = link(0, 0);
    assert_eq!(
        (&first["gen_current"], &first["gen_max"], &first["width_current"], &first["width_max"]),
        (&json!(3), &json!(5), &json!(8), &json!(16))
    );
    assert!(first["replay_counter"].as_u64().is_some_and(|n| n >= 40), "{first}");
    assert_eq!(first["replays_since_last"], Value::Null, "no growth from one reading");
    let grown = link(2, 0)["replays_since_last"].as_u64().unwrap();
    assert!((15..=60).contains(&grown), "about 30 in 0.3 s: {grown}");
    assert_eq!(link(2, 0)["replay_counter"].as_u64(), Some(link(1, 0)["replay_counter"].as_u64().unwrap() + grown));
    let no_counter = link(2, 1);
    assert_eq!((&no_counter["replay_counter"], &no_counter["replays_since_last"]), (&Value::Null, &Value::Null));
    assert_eq!(no_counter["width_current"], 16);
    assert!(link(2, 2).as_object().unwrap().values().all(Value::is_null), "{}", link(2, 2));
    // The maxima are the board's: asked once per GPU, not every tick.
    assert_eq!(calls_to(&log, "nvmlDeviceGetMaxPcieLinkGeneration"), 3);
    assert_eq!(calls_to(&log, "nvmlDeviceGetPcieReplayCounter"), 9);
}

#[test]
fn nvidia_smi_s_link_fields_read_the_link_alone() {
    let (sim, log) = Sim::logged("[[gpu]]\npcie_link_gen_current = 4\npcie_link_width_current = 8\n");
    let fields = "pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max";
    let out = sim.gpuscope().args([&format!("--query-gpu={fields}"), "--format=csv"]).output().unwrap();
    common::assert_success(&out);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "pcie.link.gen.current, pcie.link.gen.max, pcie.link.width.current, pcie.link.width.max\n4, 5, 8, 16\n"
    );
    assert_eq!(calls_to(&log, "nvmlDeviceGetCurrPcieLinkWidth"), 1);
    assert_eq!(calls_to(&log, "nvmlDeviceGetClockInfo"), 0, "nothing the fields do not show");
}

#[test]
fn the_table_does_not_ask_for_the_link() {
    let (sim, log) = Sim::logged("[[gpu]]\n");
    let out = sim.gpuscope().arg("-1").output().unwrap();
    common::assert_success(&out);
    assert_eq!(calls_to(&log, "nvmlDeviceGetCurrPcieLinkGeneration"), 0, "-1 shows no link");
    assert_eq!(calls_to(&log, "nvmlDeviceGetPcieReplayCounter"), 0);
}

/// A pretend trainer: a Python process whose main thread starts a worker
/// that names itself `pt_data_worker` and burns CPU, and a thread named
/// `pt_data_pin`. Killed, with its worker, on drop.
struct Trainer {
    child: Child,
    worker: u32,
}

impl Trainer {
    fn start() -> Option<Self> {
        const SCRIPT: &str = r#"
import ctypes, os, sys, threading, time
libc = ctypes.CDLL(None)
def name(n):
    libc.prctl(15, n, 0, 0, 0)
pid = os.fork()
if pid == 0:
    name(b"pt_data_worker")
    while True:
        pass
def pin():
    name(b"pt_data_pin")
    time.sleep(3600)
threading.Thread(target=pin, daemon=True).start()
time.sleep(0.2)
print(pid, flush=True)
time.sleep(3600)
"#;
        let mut child = Command::new("python3").args(["-c", SCRIPT]).stdout(Stdio::piped()).spawn().ok()?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let worker = line.trim().parse().expect("the worker's PID");
        Some(Self { child, worker })
    }
}

impl Drop for Trainer {
    fn drop(&mut self) {
        // SAFETY: signals to the two processes this test started.
        unsafe {
            libc::kill(self.worker as i32, libc::SIGKILL);
            libc::kill(self.child.id() as i32, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

#[test]
fn a_trainer_s_dataloader_worker_shows_with_its_cpu_and_state() {
    let Some(trainer) = Trainer::start() else {
        eprintln!("skipped: no python3");
        return;
    };
    let sim = Sim::new(&format!(
        "[[gpu]]\nutilization_gpu = 35\n[[gpu.process]]\npid = {}\nused_mib = 4096\n",
        trainer.child.id()
    ));
    let docs = watch(&sim, "400ms", "3");
    let input = |d: &Value| {
        let procs = d["processes"].as_array().unwrap();
        procs.iter().find(|p| p["pid"] == trainer.child.id()).unwrap()["host_input"].clone()
    };
    let first = input(&docs[0]);
    let workers = first["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 1, "{first:#}");
    let w = &workers[0];
    assert_eq!((&w["pid"], &w["found_by"], &w["alive"]), (&json!(trainer.worker), &json!("name"), &json!(true)));
    assert_eq!(w["cpu_percent"], Value::Null, "no rate from one reading");
    let last = input(docs.last().unwrap());
    let w = &last["workers"][0];
    assert!(w["cpu_percent"].as_f64().is_some_and(|c| c > 20.0), "a worker that spins: {w}");
    assert_eq!(w["state"], "running");
    let placed = &w["placement"];
    assert!(placed["cpus_allowed"].is_string() && placed["last_cpu"].is_u64(), "{placed}");
    let pins = last["pin_threads"].as_array().unwrap();
    assert_eq!(pins.len(), 1, "{last:#}");
    assert_eq!(pins[0]["state"], "sleeping");
    assert!(last["placement"]["last_cpu"].is_u64());
    assert!(last["workers_omitted"] == 0);
}
