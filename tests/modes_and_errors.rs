//! Output modes, configuration and the error cases, on the real binary.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Sim, assert_success, assert_valid, gpuscope};
use serde_json::Value;

#[test]
fn watch_prints_count_ndjson_lines() {
    let sim = Sim::new("[[gpu]]\nutilization_gpu = 10\n");
    let out = sim.gpuscope().args(["--json", "--watch", "--interval", "50ms", "--count", "3"]).output().unwrap();
    assert_success(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    let mut times = Vec::new();
    for line in lines {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_valid(&v);
        assert_eq!(v["interval_ms"], 50);
        times.push(v["time_unix_ms"].as_u64().unwrap());
    }
    assert!(times.windows(2).all(|w| w[0] < w[1]), "each line is a new snapshot: {times:?}");
}

#[test]
fn a_closed_pipe_ends_the_stream_quietly() {
    let sim = Sim::new("[[gpu]]\n");
    let mut child = sim
        .gpuscope()
        .args(["--json", "--watch", "--interval", "20ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    // The reader is dropped here, as `head -n 1` exits after one line.
    assert!(first.starts_with('{'));
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn shell_pipe_into_head_exits_zero() {
    let sim = Sim::new("[[gpu]]\n");
    let bin = assert_cmd::cargo::cargo_bin("gpuscope");
    let script = format!(
        "set -o pipefail; {:?} --nvml-lib {:?} --json --watch --interval 20ms | head -n 1 > /dev/null",
        bin, sim.lib
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &script])
        .env("GPUSCOPE_SIM_SCENARIO", &sim.scenario)
        .env("XDG_CONFIG_HOME", sim.dir.path())
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn missing_driver_is_one_clear_line_and_exit_2() {
    for mode in [&["--json"][..], &["-1"], &[]] {
        let out = gpuscope().args(["--nvml-lib", "/nonexistent/libnvidia-ml.so.1"]).args(mode).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{mode:?}");
        assert!(out.stdout.is_empty());
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("/nonexistent/libnvidia-ml.so.1"), "{err}");
        assert!(err.contains("--nvml-lib") && err.contains("--demo"), "{err}");
    }
}

#[test]
fn config_errors_name_key_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gpuscope.toml");
    std::fs::write(&path, "interval = \"1s\"\nintervall = \"2s\"\n").unwrap();
    let out = gpuscope().arg("--config").arg(&path).arg("--demo").arg("--json").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains(path.to_str().unwrap()) && err.contains("intervall") && err.contains("line 2"), "{err}");

    std::fs::write(&path, "gpus = 3\n").unwrap();
    let out = gpuscope().arg("--config").arg(&path).arg("--demo").arg("--json").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("gpus") && err.contains("line 1"), "{err}");
}

#[test]
fn flags_override_the_config_file() {
    let sim = Sim::new("[[gpu]]\n[[gpu]]\n");
    let config = sim.dir.path().join("config.toml");
    std::fs::write(&config, "interval = \"2s\"\ngpus = [\"1\"]\n").unwrap();
    let from_file = sim.json(&["--config", config.to_str().unwrap()]);
    assert_eq!(from_file["interval_ms"], 2000);
    assert_eq!(from_file["gpus"].as_array().unwrap().len(), 1);
    assert_eq!(from_file["gpus"][0]["index"], 1);

    let overridden = sim.json(&["--config", config.to_str().unwrap(), "--interval", "300ms", "--gpus", "0"]);
    assert_eq!(overridden["interval_ms"], 300);
    assert_eq!(overridden["gpus"][0]["index"], 0);

    // The config's default location is honoured too.
    let xdg = sim.dir.path().join("xdg");
    std::fs::create_dir_all(xdg.join("gpuscope")).unwrap();
    std::fs::write(xdg.join("gpuscope/config.toml"), "interval = \"750ms\"\n").unwrap();
    let out = sim.gpuscope().arg("--json").env("XDG_CONFIG_HOME", &xdg).output().unwrap();
    assert_success(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["interval_ms"], 750);
}

#[test]
fn nvml_lib_comes_from_the_environment_too() {
    let sim = Sim::new("[[gpu]]\nname = \"From Env\"\n");
    let out = gpuscope()
        .arg("--json")
        .env("GPUSCOPE_NVML_LIB", &sim.lib)
        .env("GPUSCOPE_SIM_SCENARIO", &sim.scenario)
        .output()
        .unwrap();
    assert_success(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["gpus"][0]["name"], "From Env");
}

#[test]
fn a_changed_scenario_is_picked_up_while_watching() {
    let sim = Sim::new("[[gpu]]\nutilization_gpu = 10\n[[gpu]]\nname = \"B\"\n");
    let mut child =
        sim.gpuscope().args(["--json", "--watch", "--interval", "30ms"]).stdout(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let parse = |line: String| serde_json::from_str::<Value>(&line).unwrap();
    let first = parse(lines.next().unwrap().unwrap());
    assert_eq!(first["gpus"][0]["utilization"]["gpu"], 10);
    sim.rewrite("[[gpu]]\nutilization_gpu = 90\n[[gpu]]\nname = \"B\"\nstate = \"lost\"\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    let changed = loop {
        let v = parse(lines.next().unwrap().unwrap());
        if v["gpus"][0]["utilization"]["gpu"] == 90 {
            break v;
        }
        assert!(Instant::now() < deadline, "the new scenario was never seen");
    };
    // Fallen off the bus mid-run: marked lost, still named from what was
    // read while it was there.
    assert_eq!(changed["gpus"][1]["state"], "lost");
    assert_eq!(changed["gpus"][1]["name"], "B");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn table_fits_80_columns_for_one_to_eight_gpus() {
    for n in 1..=8 {
        let mut scenario = String::new();
        for i in 0..n {
            scenario.push_str(&format!(
                "[[gpu]]\nname = \"NVIDIA H100 80GB HBM3 with a very long marketing name\"\nthrottle_reasons = 0x1ff\nmig_current = true\npower_draw_w = 1234.5\npower_limit_w = 1500\nmemory_total_mib = 144384\n[[gpu.process]]\npid = {}\nused_mib = 70000\nname = \"python3 -m torch.distributed.run --nproc-per-node 8 train.py\"\n",
                4_100_000 + i
            ));
        }
        let sim = Sim::new(&scenario);
        let out = sim.gpuscope().arg("-1").output().unwrap();
        assert_success(&out);
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.is_ascii(), "{text}");
        for line in text.lines() {
            assert!(line.len() <= 80, "{n} GPUs: {} columns: {line}", line.len());
        }
        assert_eq!(text.matches("NVIDIA H100").count(), n, "{text}");
        assert_eq!(text.matches("python3").count(), n, "{text}");
    }
}

#[test]
fn no_terminal_means_the_table() {
    let sim = Sim::new("[[gpu]]\nname = \"Piped\"\n");
    let out = sim.gpuscope().output().unwrap();
    assert_success(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Piped") && text.contains("MEMORY USED/TOT"), "{text}");
}

#[test]
fn demo_runs_without_a_driver() {
    let out = gpuscope().args(["--demo", "--json"]).output().unwrap();
    assert_success(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid(&v);
    assert_eq!(v["simulated"], true);
    let gpus = v["gpus"].as_array().unwrap();
    assert!(gpus.len() >= 4);
    // A DDP job across GPUs, an inference server, an idle GPU.
    let on = |i: u64| v["processes"].as_array().unwrap().iter().filter(|p| p["gpus"][0]["index"] == i).count();
    assert!(on(0) >= 1 && on(1) >= 1 && on(2) >= 1, "{v:#}");
    assert!(gpus.iter().any(|g| g["utilization"]["gpu"] == 0), "an idle GPU");

    let table = gpuscope().args(["--demo", "-1"]).output().unwrap();
    assert_success(&table);
    assert!(String::from_utf8_lossy(&table.stdout).contains("simulated"));
}

#[test]
fn demo_auto_falls_back_only_without_a_driver() {
    let out =
        gpuscope().args(["--demo=auto", "--json", "--nvml-lib", "/nonexistent/libnvidia-ml.so.1"]).output().unwrap();
    assert_success(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["simulated"], true);
    assert!(String::from_utf8_lossy(&out.stderr).contains("simulated GPUs"));

    let sim = Sim::new("[[gpu]]\nname = \"Real enough\"\n");
    let v = sim.json(&["--demo=auto"]);
    assert_eq!(v["simulated"], false);
    assert_eq!(v["gpus"][0]["name"], "Real enough");
}

#[test]
fn a_driver_that_goes_away_is_reported_and_reloaded() {
    let healthy = "[[gpu]]\nname = \"Steady\"\n";
    let sim = Sim::new(healthy);
    let mut child =
        sim.gpuscope().args(["--json", "--watch", "--interval", "50ms"]).stdout(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || serde_json::from_str::<Value>(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(next()["sources"]["nvml"]["ok"], true);

    sim.rewrite(&format!("init_error = \"driver_not_loaded\"\n{healthy}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    let failed = loop {
        let v = next();
        if v["sources"]["nvml"]["ok"] == false {
            break v;
        }
        assert!(Instant::now() < deadline, "the failure was never reported");
    };
    assert_valid(&failed);
    let err = failed["sources"]["nvml"]["error"].as_str().unwrap();
    assert!(err.contains("not loaded"), "{err}");
    assert_eq!(failed["gpus"], Value::Array(vec![]), "no stale readings pass for current ones");
    assert!(failed["host"]["memory_total"].is_u64(), "the host source keeps going");

    sim.rewrite(healthy);
    loop {
        let v = next();
        if v["sources"]["nvml"]["ok"] == true {
            assert_eq!(v["gpus"][0]["name"], "Steady");
            break;
        }
        assert!(Instant::now() < deadline, "NVML was never loaded again");
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_slow_driver_still_answers_and_unsupported_readings_are_quiet() {
    // 20 ms per call, like a driver without persistence mode.
    let sim = Sim::new("call_delay_ms = 20\n[[gpu]]\nunsupported = [\"fan\", \"power\", \"pcie\", \"encoder\"]\n");
    let out = sim.gpuscope().arg("--json").output().unwrap();
    assert_success(&out);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "no log spam");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid(&v);
    assert_eq!(v["gpus"][0]["fan_percent"], Value::Null);
    assert_eq!(v["gpus"][0]["power_draw_w"], Value::Null);
    assert_eq!(v["gpus"][0]["pcie"]["tx_bytes_per_s"], Value::Null);
    // More than ten calls each delayed 20 ms: a lower bound, not a timing check.
    assert!(v["collection_ms"].as_f64().unwrap() >= 200.0, "{}", v["collection_ms"]);
}
