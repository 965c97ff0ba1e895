//! `--query-gpu` / `--query-compute-apps` against nvidia-smi's own output,
//! byte for byte: each reference below is what nvidia-smi printed on a real
//! machine (the source is named with it), and the simulated NVML is given
//! that machine's readings.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Output, Stdio};

use common::{Sim, assert_success};

fn query(sim: &Sim, args: &[&str]) -> Output {
    sim.gpuscope().env("TZ", "UTC").args(args).output().unwrap()
}

fn stdout_of(sim: &Sim, args: &[&str]) -> String {
    let out = query(sim, args);
    assert_success(&out);
    String::from_utf8(out.stdout).unwrap()
}

/// Ampere (A10G), a session log published in a public repository (2026):
/// `nvidia-smi --query-gpu=index,name,memory.total,memory.used,memory.free --format=csv`.
/// 23028 MiB total with 22403 used and 215 free: the driver keeps 410 back.
#[test]
fn a10g_memory() {
    let sim = Sim::new(
        r#"
[[gpu]]
name = "NVIDIA A10G"
memory_total_mib = 23028
memory_reserved_mib = 410
memory_used_mib = 22403
"#,
    );
    let reference = "index, name, memory.total [MiB], memory.used [MiB], memory.free [MiB]\n\
                     0, NVIDIA A10G, 23028 MiB, 22403 MiB, 215 MiB\n";
    let args = ["--query-gpu=index,name,memory.total,memory.used,memory.free", "--format=csv"];
    assert_eq!(stdout_of(&sim, &args), reference);
}

/// Ampere workstation (2 x RTX A6000), an audit log published in a public
/// repository (2026): the same query plus `utilization.gpu`.
#[test]
fn two_rtx_a6000() {
    let sim = Sim::new(
        r#"
[[gpu]]
name = "NVIDIA RTX A6000"
memory_total_mib = 49140
memory_reserved_mib = 598
memory_used_mib = 35

[[gpu]]
name = "NVIDIA RTX A6000"
memory_total_mib = 49140
memory_reserved_mib = 599
memory_used_mib = 20
"#,
    );
    let reference = "index, name, memory.total [MiB], memory.used [MiB], memory.free [MiB], utilization.gpu [%]\n\
                     0, NVIDIA RTX A6000, 49140 MiB, 35 MiB, 48507 MiB, 0 %\n\
                     1, NVIDIA RTX A6000, 49140 MiB, 20 MiB, 48521 MiB, 0 %\n";
    let args = ["--query-gpu=index,name,memory.total,memory.used,memory.free,utilization.gpu", "--format=csv"];
    assert_eq!(stdout_of(&sim, &args), reference);
}

/// A process whose `argv[0]` is `name`, as NVML names it.
fn named_process(name: &str) -> Child {
    Command::new("sleep").arg0(name).arg("60").stdin(Stdio::null()).spawn().unwrap()
}

/// Turing (Tesla T4, driver 440.100), the fixture of a public repository's
/// stats collector, recorded from `nvidia-smi --query-compute-apps=
/// timestamp,gpu_name,gpu_bus_id,pid,process_name,used_gpu_memory --format=csv`.
/// The PIDs are this test's own processes (named as the reference's are),
/// and the timestamp is this run's: both are put into the reference.
#[test]
fn tesla_t4_compute_apps() {
    let mut a = named_process("/usr/local/bin/ffmpeg");
    let mut b = named_process("/usr/local/bin/ffmpeg");
    let (pa, pb) = (a.id(), b.id());
    let sim = Sim::new(&format!(
        r#"
[[gpu]]
name = "Tesla T4"
pci_bus_id = "00000000:AF:00.0"
memory_total_mib = 15109
[[gpu.process]]
pid = {pa}
used_mib = 761
[[gpu.process]]
pid = {pb}
used_mib = 1227
"#
    ));
    let args = ["--query-compute-apps=timestamp,gpu_name,gpu_bus_id,pid,process_name,used_gpu_memory", "--format=csv"];
    let text = stdout_of(&sim, &args);
    let _ = (a.kill(), b.kill(), a.wait(), b.wait());
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("timestamp, gpu_name, gpu_bus_id, pid, process_name, used_gpu_memory [MiB]"));
    let stamp = &text.lines().nth(1).unwrap()[..23];
    let mut rows = [(pa, 761), (pb, 1227)];
    rows.sort_unstable();
    let expected: Vec<String> = rows
        .iter()
        .map(|(pid, mib)| format!("{stamp}, Tesla T4, 00000000:AF:00.0, {pid}, /usr/local/bin/ffmpeg, {mib} MiB"))
        .collect();
    assert_eq!(lines.collect::<Vec<_>>(), expected);
    assert_timestamp(stamp);
}

fn assert_timestamp(t: &str) {
    let ok = t.len() == 23
        && t.char_indices().all(|(i, c)| match i {
            4 | 7 => c == '/',
            10 => c == ' ',
            13 | 16 => c == ':',
            19 => c == '.',
            _ => c.is_ascii_digit(),
        });
    assert!(ok, "not nvidia-smi's timestamp: {t:?}");
}

const ONE_GPU: &str = r#"
[[gpu]]
name = "NVIDIA H100 80GB HBM3"
uuid = "GPU-11111111-2222-3333-4444-555555555555"
pci_bus_id = "00000000:18:00.0"
memory_total_mib = 81559
memory_reserved_mib = 521
memory_used_mib = 1024
utilization_gpu = 45
temperature_c = 41
power_draw_w = 106.555
power_limit_w = 700
sm_clock_mhz = 1980
mem_clock_mhz = 2619
pstate = 0
throttle_reasons = 5
unsupported = ["fan"]
"#;

#[test]
fn units_aliases_and_not_available() {
    let sim = Sim::new(ONE_GPU);
    let fields = "gpu_name,gpu_uuid,gpu_bus_id,memory.used,utilization.gpu,temperature.gpu,power.draw,fan.speed,\
                  clocks.sm,clocks.mem,pstate,enforced.power.limit";
    let header = "name, uuid, pci.bus_id, memory.used [MiB], utilization.gpu [%], temperature.gpu, power.draw [W], \
                  fan.speed [%], clocks.current.sm [MHz], clocks.current.memory [MHz], pstate, enforced.power.limit [W]\n";
    let row = "NVIDIA H100 80GB HBM3, GPU-11111111-2222-3333-4444-555555555555, 00000000:18:00.0, 1024 MiB, 45 %, \
               41, 106.56 W, [N/A], 1980 MHz, 2619 MHz, P0, 700.00 W\n";
    let q = format!("--query-gpu={fields}");
    assert_eq!(stdout_of(&sim, &[&q, "--format=csv"]), format!("{header}{row}"));
    let bare = "NVIDIA H100 80GB HBM3, GPU-11111111-2222-3333-4444-555555555555, 00000000:18:00.0, 1024, 45, 41, \
                106.56, [N/A], 1980, 2619, P0, 700.00\n";
    assert_eq!(stdout_of(&sim, &[&q, "--format=csv,noheader,nounits"]), bare);
}

#[test]
fn throttle_reasons_under_either_name() {
    let sim = Sim::new(ONE_GPU);
    let q = "--query-gpu=clocks_throttle_reasons.active,clocks_event_reasons.gpu_idle,\
             clocks_throttle_reasons.sw_power_cap,clocks_event_reasons.hw_slowdown";
    assert_eq!(
        stdout_of(&sim, &[q, "--format=csv"]),
        "clocks_throttle_reasons.active, clocks_event_reasons.gpu_idle, clocks_throttle_reasons.sw_power_cap, \
         clocks_event_reasons.hw_slowdown\n0x0000000000000005, Active, Active, Not Active\n"
    );
}

#[test]
fn unknown_field_as_nvidia_smi_says_it() {
    let sim = Sim::new(ONE_GPU);
    let out = query(&sim, &["--query-gpu=index,cuda_version", "--format=csv"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Field \"cuda_version\" is not a valid field to query.\n\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--help-query-gpu"));
    let out = query(&sim, &["--query-gpu=index", "--format=xml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"xml\" is not one of csv"), "{out:?}");
}

#[test]
fn a_lost_gpu_keeps_its_identity() {
    let sim = Sim::new(
        r#"
[[gpu]]
name = "NVIDIA A100-SXM4-80GB"
state = "lost"
[[gpu]]
name = "NVIDIA A100-SXM4-80GB"
memory_used_mib = 7
"#,
    );
    let text = stdout_of(&sim, &["--query-gpu=index,memory.used,count", "--format=csv,noheader"]);
    assert_eq!(text, "0, [GPU is lost], 2\n1, 7 MiB, 2\n");
}

#[test]
fn help_lists_the_fields() {
    let out = common::gpuscope().arg("--help-query-gpu").output().unwrap();
    assert_success(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("List of valid properties to query for the switch \"--query-gpu=\":"));
    assert!(text.contains("\"pci.bus_id\" or \"gpu_bus_id\""));
    let out = common::gpuscope().arg("--help-query-compute-apps").output().unwrap();
    assert!(String::from_utf8(out.stdout).unwrap().contains("\"process_name\" or \"name\""));
}

/// Pascal (Tesla P100-PCIE-16GB), netdata's nvidia_smi collector test
/// data (`src/go/plugin/go.d/modules/nvidia_smi/testdata/tesla-p100.csv`,
/// recorded from nvidia-smi with `--format=csv,nounits`; the file lacks
/// the final newline nvidia-smi writes). Units stay in the header.
/// 16384 MiB: 103 reserved, 0 used (half a MiB), 16280 free, rounded down.
#[test]
fn tesla_p100_nounits() {
    let sim = Sim::new(
        r#"
driver_version = "470.57.02"
[[gpu]]
name = "Tesla P100-PCIE-16GB"
uuid = "GPU-ef1b2c9b-38d8-2090-2bd1-f567a3eb42a6"
unsupported = ["fan"]
pstate = 0
memory_total_mib = 16384
memory_reserved_mib = 103
memory_used_mib = 0.5
temperature_c = 37
power_draw_w = 28.16
sm_clock_mhz = 405
mem_clock_mhz = 715
video_clock_mhz = 835
"#,
    );
    let reference = "name, uuid, fan.speed [%], pstate, memory.reserved [MiB], memory.used [MiB], memory.free [MiB], \
                     utilization.gpu [%], utilization.memory [%], temperature.gpu, power.draw [W], \
                     clocks.current.graphics [MHz], clocks.current.sm [MHz], clocks.current.memory [MHz], \
                     clocks.current.video [MHz]\n\
                     Tesla P100-PCIE-16GB, GPU-ef1b2c9b-38d8-2090-2bd1-f567a3eb42a6, [N/A], P0, 103, 0, 16280, 0, 0, \
                     37, 28.16, 405, 405, 715, 835\n";
    let q = "--query-gpu=name,uuid,fan.speed,pstate,memory.reserved,memory.used,memory.free,utilization.gpu,\
             utilization.memory,temperature.gpu,power.draw,clocks.current.graphics,clocks.current.sm,\
             clocks.current.memory,clocks.current.video";
    assert_eq!(stdout_of(&sim, &[q, "--format=csv,nounits"]), reference);
}

/// Turing (Tesla T4, driver 440.100), the same repository's fixture for
/// `--query-gpu=driver_version,count,name,serial,uuid,pci.bus_id,index,
/// fan.speed,pstate,memory.total,memory.used,memory.free,
/// utilization.memory,utilization.gpu,temperature.gpu --format=csv`: a
/// passively cooled board (fan `[N/A]`) and a driver before memory.reserved.
#[test]
fn tesla_t4_inventory() {
    let sim = Sim::new(
        r#"
driver_version = "440.100"
[[gpu]]
name = "Tesla T4"
serial = "1325219083788"
uuid = "GPU-bbd3f1b1-660a-44b0-911f-169e11579607"
pci_bus_id = "00000000:AF:00.0"
unsupported = ["fan"]
memory_total_mib = 15109
memory_used_mib = 2003
utilization_memory = 9
utilization_gpu = 36
temperature_c = 45
"#,
    );
    let reference = "driver_version, count, name, serial, uuid, pci.bus_id, index, fan.speed [%], pstate, \
                     memory.total [MiB], memory.used [MiB], memory.free [MiB], utilization.memory [%], \
                     utilization.gpu [%], temperature.gpu\n\
                     440.100, 1, Tesla T4, 1325219083788, GPU-bbd3f1b1-660a-44b0-911f-169e11579607, \
                     00000000:AF:00.0, 0, [N/A], P0, 15109 MiB, 2003 MiB, 13106 MiB, 9 %, 36 %, 45\n";
    let q = "--query-gpu=driver_version,count,name,serial,uuid,pci.bus_id,index,fan.speed,pstate,memory.total,\
             memory.used,memory.free,utilization.memory,utilization.gpu,temperature.gpu";
    assert_eq!(stdout_of(&sim, &[q, "--format=csv"]), reference);
}

/// Ampere (8 x A800-SXM4-80GB, driver 535.104.12), a Go GPU library's test
/// data (`gputil`), recorded with `--format=csv,noheader`: serial numbers,
/// power with two decimals, one GPU under load. nvidia-smi stamps each row
/// as it reads it; gpuscope gives every row the snapshot's time, so the
/// timestamp column is checked for its form and the rest byte for byte.
#[test]
fn eight_a800_noheader() {
    const ROWS: [&str; 8] = [
        "0, GPU-fd189414-e0f6-58a0-7031-fefe0ce43b1d, 0 %, 81920 MiB, 2 MiB, 81226 MiB, 535.104.12, NVIDIA A800-SXM4-80GB, 1321923001828, 61.89 W, 400.00 W, 33",
        "1, GPU-121ebc1f-3e5d-139d-7aac-57311d5bafc7, 0 %, 81920 MiB, 2 MiB, 81226 MiB, 535.104.12, NVIDIA A800-SXM4-80GB, 1321923003018, 59.46 W, 400.00 W, 31",
        "2, GPU-b74d1aeb-0aab-b3ca-ff55-94e24cbe0cd6, 0 %, 81920 MiB, 2 MiB, 81226 MiB, 535.104.12, NVIDIA A800-SXM4-80GB, 1321423018183, 60.74 W, 400.00 W, 30",
        "3, GPU-401e53f2-8f44-1fc5-469d-8e36c1d6c9c5, 0 %, 81920 MiB, 2 MiB, 81226 MiB, 535.104.12, NVIDIA A800-SXM4-80GB, 1321923002415, 59.55 W, 400.00 W, 31",
        "4, GPU-8b63b1f2-98e1-b24e-f59f-d725d51b3a2b, 0 %, 81920 MiB, 2 MiB, 81226 MiB, 535.104.12, NVIDIA A800-SXM4-80GB, 1321923000426, 62.17 W, 400.00 W, 32",
        "5, GPU-67fc57fc-34ad-4126-2f66-0b8d29144c75, 0 %, 81920 MiB, 2 MiB, 81226 MiB, 535.104.12, NVIDIA A800-SXM4-80GB, 1321923001319, 61.95 W, 400.00 W, 32",
        "6, GPU-105ee81f-dddd-aaf0-2e30-ca1593fdbf18, 100 %, 81920 MiB, 74829 MiB, 6399 MiB, 535.104.12, NVIDIA A800-SXM4-80GB, 1321923002833, 359.75 W, 400.00 W, 70",
        "7, GPU-349fa89c-151d-340e-c147-94506daf1357, 0 %, 81920 MiB, 2 MiB, 81226 MiB, 535.104.12, NVIDIA A800-SXM4-80GB, 1321823066087, 71.08 W, 400.00 W, 49",
    ];
    let mut scenario = String::from("driver_version = \"535.104.12\"\n");
    for row in ROWS {
        let v: Vec<&str> = row.split(", ").collect();
        let num = |i: usize| v[i].split(' ').next().unwrap();
        scenario += &format!(
            "[[gpu]]\nname = \"{}\"\nuuid = \"{}\"\nserial = \"{}\"\nutilization_gpu = {}\nmemory_total_mib = 81920\n\
             memory_reserved_mib = 692\nmemory_used_mib = {}\npower_draw_w = {}\npower_limit_w = {}\ntemperature_c = {}\n",
            v[7],
            v[1],
            v[8],
            num(2),
            num(4),
            num(9),
            num(10),
            v[11]
        );
    }
    let sim = Sim::new(&scenario);
    let q = "--query-gpu=index,uuid,utilization.gpu,memory.total,memory.used,memory.free,driver_version,name,serial,\
             power.draw,power.limit,temperature.gpu,timestamp";
    let text = stdout_of(&sim, &[q, "--format=csv,noheader"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 8, "{text}");
    for (line, reference) in lines.iter().zip(ROWS) {
        let (rest, stamp) = line.rsplit_once(", ").unwrap();
        assert_eq!(rest, reference);
        assert_timestamp(stamp);
    }
    assert!(text.ends_with('\n'));
}

#[test]
fn settings_ecc_and_max_clocks() {
    let sim = Sim::new(
        r#"
[[gpu]]
persistence_mode = false
compute_mode = "exclusive_process"
ecc_corrected_volatile = 3
ecc_uncorrected_aggregate = 1
retired_pages_pending = true
max_sm_clock_mhz = 1980
max_mem_clock_mhz = 2619
[[gpu]]
ecc_enabled = false
ecc_pending = true
unsupported = ["persistence_mode", "compute_mode", "max_clocks", "retired_pages"]
"#,
    );
    let q = "--query-gpu=persistence_mode,compute_mode,ecc.mode.current,ecc.mode.pending,\
             ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.aggregate.total,retired_pages.pending,\
             clocks.max.sm,clocks.max.mem";
    assert_eq!(
        stdout_of(&sim, &[q, "--format=csv"]),
        "persistence_mode, compute_mode, ecc.mode.current, ecc.mode.pending, ecc.errors.corrected.volatile.total, \
         ecc.errors.uncorrected.aggregate.total, retired_pages.pending, clocks.max.sm [MHz], clocks.max.memory [MHz]\n\
         Disabled, Exclusive_Process, Enabled, Enabled, 3, 1, Yes, 1980 MHz, 2619 MHz\n\
         [N/A], [N/A], Disabled, Enabled, [N/A], [N/A], [N/A], [N/A], [N/A]\n"
    );
}
