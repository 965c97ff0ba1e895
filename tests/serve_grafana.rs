//! The Grafana dashboard: imports cleanly (inputs, datasources, layout),
//! its PromQL parses (promtool), and it asks only for metrics and labels
//! the exporter emits.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

const DS: &str = "${DS_PROMETHEUS}";
const LABELS: &[&str] = &[
    "instance",
    "job",
    "gpu",
    "uuid",
    "name",
    "pci_bus_id",
    "pid",
    "user",
    "command",
    "rank",
    "job_id",
    "kind",
    "severity",
    "version",
];

fn dashboard() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/grafana/gpuscope.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).expect("the dashboard is JSON")
}

/// Every panel, rows' nested panels included.
fn panels(v: &Value) -> Vec<&Value> {
    let mut all = Vec::new();
    for p in v["panels"].as_array().unwrap() {
        all.push(p);
        all.extend(p["panels"].as_array().into_iter().flatten());
    }
    all
}

/// Every PromQL expression: panel targets and template variable queries.
fn expressions(v: &Value) -> Vec<String> {
    let targets = panels(v).into_iter().flat_map(|p| p["targets"].as_array().into_iter().flatten());
    let mut exprs: Vec<String> = targets.map(|t| t["expr"].as_str().expect("a target without expr").into()).collect();
    for var in v["templating"]["list"].as_array().unwrap() {
        exprs.push(var["query"]["query"].as_str().or(var["query"].as_str()).unwrap().into());
    }
    exprs
}

/// (metric names, label names) an expression refers to: identifiers
/// outside quotes, and inside braces the ones a matcher follows.
fn names(expr: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut metrics, mut labels) = (BTreeSet::new(), BTreeSet::new());
    let chars: Vec<char> = expr.chars().collect();
    let (mut i, mut in_braces) = (0, false);
    while i < chars.len() {
        match chars[i] {
            '"' => {
                i += 1;
                while chars[i] != '"' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
            }
            '{' => in_braces = true,
            '}' => in_braces = false,
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let next = chars[i..].iter().find(|c| !c.is_whitespace());
                if in_braces && matches!(next, Some('=' | '!')) {
                    labels.insert(word);
                } else if word.starts_with("gpuscope_") {
                    metrics.insert(word);
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    (metrics, labels)
}

#[test]
fn it_imports_cleanly() {
    let v = dashboard();
    assert!(v["schemaVersion"].as_u64().unwrap() >= 36);
    assert!(v["uid"].is_string() && v["title"].is_string() && v["id"].is_null());
    let input = &v["__inputs"][0];
    assert_eq!(
        (&input["name"], &input["type"], &input["pluginId"]),
        (&"DS_PROMETHEUS".into(), &"datasource".into(), &"prometheus".into())
    );
    let mut ids = BTreeSet::new();
    for p in panels(&v) {
        assert!(ids.insert(p["id"].as_u64().unwrap()), "panel id {} twice", p["id"]);
        let grid = &p["gridPos"];
        assert!(grid["x"].as_u64().unwrap() + grid["w"].as_u64().unwrap() <= 24, "{}", p["title"]);
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], DS, "{}", p["title"]);
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{} has no query", p["title"]);
        assert!(targets.iter().all(|t| t["datasource"]["uid"] == DS), "{}", p["title"]);
    }
    let vars: Vec<&Value> = v["templating"]["list"].as_array().unwrap().iter().collect();
    let var = |name: &str| *vars.iter().find(|v| v["name"] == name).unwrap_or_else(|| panic!("no ${name}"));
    assert_eq!(var("instance")["definition"], "label_values(gpuscope_build_info, instance)");
    assert_eq!(var("instance")["datasource"]["uid"], DS);
    assert!(var("gpu")["definition"].as_str().unwrap().contains("gpu)"));
}

#[test]
fn every_query_names_only_what_the_exporter_emits() {
    let emitted: BTreeSet<String> = gpuscope::serve::metrics::sample_names().into_iter().collect();
    let mut used = BTreeSet::new();
    for expr in expressions(&dashboard()) {
        let (metrics, labels) = names(&expr);
        assert!(!metrics.is_empty(), "{expr} reads no gpuscope metric");
        for m in &metrics {
            assert!(emitted.contains(m), "{expr}: gpuscope does not emit {m}");
        }
        for l in &labels {
            assert!(LABELS.contains(&l.as_str()), "{expr}: no series has a label {l}");
        }
        used.extend(metrics);
    }
    for needed in [
        "gpuscope_gpu_allocator_allocated_bytes",
        "gpuscope_allocator_fragmentation_ratio",
        "gpuscope_alert_active",
        "gpuscope_gpu_sm_active_ratio",
        "gpuscope_gpu_tensor_active_ratio",
        "gpuscope_gpu_dram_active_ratio",
        "gpuscope_gpu_activity_unavailable",
        "gpuscope_process_data_wait_ratio",
        "gpuscope_dataloader_batches_per_second",
        "gpuscope_process_shm_size_bytes",
        "gpuscope_process_shm_free_bytes",
    ] {
        assert!(used.contains(needed), "the dashboard should show {needed}");
    }
}

/// Issue 57: SM activity and NVML's utilisation on one panel, so that the
/// gap between "a kernel ran" and "the SMs worked" is seen at a glance.
#[test]
fn the_real_work_row_sets_sm_activity_beside_utilisation() {
    let v = dashboard();
    let all = panels(&v);
    let row = all.iter().position(|p| p["type"] == "row" && p["title"].as_str().unwrap().starts_with("Real work"));
    let after_row = &all[row.expect("a Real work row") + 1..];
    let sm = after_row.iter().find(|p| p["title"] == "SM active vs utilisation").expect("the SM panel");
    let (metrics, _) = names(
        &sm["targets"].as_array().unwrap().iter().map(|t| t["expr"].as_str().unwrap()).collect::<Vec<_>>().join(" + "),
    );
    assert_eq!(
        metrics.into_iter().collect::<Vec<_>>(),
        ["gpuscope_gpu_sm_active_ratio", "gpuscope_gpu_utilization_ratio"]
    );
    assert_eq!(sm["fieldConfig"]["defaults"]["unit"], "percentunit", "ratios from 0 to 1");
}

/// The panels after the row titled `title`, up to the next row.
fn row<'a>(all: &[&'a Value], title: &str) -> Vec<&'a Value> {
    let start = all.iter().position(|p| p["type"] == "row" && p["title"].as_str().unwrap().starts_with(title));
    let after = &all[start.unwrap_or_else(|| panic!("a {title} row")) + 1..];
    after.iter().take_while(|p| p["type"] != "row").copied().collect()
}

fn panel_exprs(p: &Value) -> Vec<&str> {
    p["targets"].as_array().unwrap().iter().map(|t| t["expr"].as_str().unwrap()).collect()
}

/// The labels `by (...)` and `without (...)` clauses name.
fn grouped_by(expr: &str) -> BTreeSet<String> {
    let mut labels = BTreeSet::new();
    for clause in ["by (", "by(", "without (", "without("] {
        for (at, _) in expr.match_indices(clause) {
            let inside = expr[at + clause.len()..].split(')').next().unwrap();
            labels.extend(inside.split(',').map(|l| l.trim().to_string()).filter(|l| !l.is_empty()));
        }
    }
    labels
}

/// Issue 58: the Input pipeline row reads the data-wait share per process
/// and per job, batches per second and `/dev/shm`, and each of its queries
/// finds series with the labels it groups and filters by in what a
/// running exporter (the demo's probed jobs) writes.
#[test]
fn the_input_pipeline_row_reads_series_the_exporter_writes() {
    let v = dashboard();
    let all = panels(&v);
    let input = row(&all, "Input pipeline");
    let title = |t: &str| *input.iter().find(|p| p["title"] == t).unwrap_or_else(|| panic!("no panel {t}"));
    let reads = |t: &str| names(&panel_exprs(title(t)).join(" + ")).0.into_iter().collect::<Vec<_>>();
    assert_eq!(reads("Data wait per process"), ["gpuscope_process_data_wait_ratio"]);
    assert_eq!(reads("Data wait per job (all hosts)"), ["gpuscope_process_data_wait_ratio"]);
    assert!(reads("Batches per second per DataLoader").contains(&"gpuscope_dataloader_batches_per_second".into()));
    assert_eq!(
        reads("/dev/shm: used vs size"),
        ["gpuscope_process_shm_free_bytes", "gpuscope_process_shm_need_bytes", "gpuscope_process_shm_size_bytes"]
    );
    for t in ["Data wait per process", "Data wait per job (all hosts)"] {
        assert_eq!(title(t)["fieldConfig"]["defaults"]["unit"], "percentunit", "{t}: a ratio from 0 to 1");
    }

    let server =
        serve_common::Server::start(common::gpuscope(), &["--demo", "--listen", "127.0.0.1:0", "--interval", "200ms"]);
    let body = server
        .until("/metrics", "the demo's input pipeline", |r| r.body.contains("gpuscope_process_data_wait_ratio{"))
        .body;
    // Prometheus adds these at scrape time.
    let added = ["instance", "job"];
    // The demo's jobs never fail (the library's tests write a failure).
    let when_it_happens = ["gpuscope_process_dataloader_failures"];
    for p in &input {
        for expr in panel_exprs(p) {
            let (metrics, matched) = names(expr);
            let wanted: BTreeSet<String> =
                matched.into_iter().chain(grouped_by(expr)).filter(|l| !added.contains(&l.as_str())).collect();
            for m in metrics.iter().filter(|m| !when_it_happens.contains(&m.as_str())) {
                let series: Vec<&str> = body.lines().filter(|l| l.starts_with(&format!("{m}{{"))).collect();
                assert!(!series.is_empty(), "{expr}: the demo's exporter writes no {m}");
                for label in &wanted {
                    let has = series.iter().any(|s| s.contains(&format!("{label}=\"")));
                    assert!(has, "{expr}: no {m} series has a label {label}: {series:#?}");
                }
            }
        }
    }
    serve_common::promtool_check(&body);
}

#[test]
fn every_query_parses() {
    let promtool = serve_common::require("promtool");
    let dir = tempfile::tempdir().unwrap();
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, expr) in expressions(&dashboard()).iter().enumerate() {
        if expr.starts_with("label_values(") {
            continue;
        }
        // Grafana's variables, as it would fill them in.
        let expr = expr.replace("$instance", "host:10983").replace("$gpu", "0").replace("$__rate_interval", "1m");
        rules.push_str(&format!("      - record: dashboard:query_{i}\n        expr: {}\n", serde_json::json!(expr)));
    }
    let file = dir.path().join("rules.yml");
    std::fs::write(&file, &rules).unwrap();
    let out = Command::new(promtool).args(["check", "rules"]).arg(&file).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "promtool check rules:\n{said}\n{rules}");
}

#[test]
fn the_name_scanner_skips_quoted_values() {
    let (metrics, labels) = names(r#"increase(gpuscope_a_total{pid="gpuscope_x", gpu=~"a\"b"}[1m]) or gpuscope_b"#);
    assert_eq!(metrics.into_iter().collect::<Vec<_>>(), ["gpuscope_a_total", "gpuscope_b"]);
    assert_eq!(labels.into_iter().collect::<Vec<_>>(), ["gpu", "pid"]);
    let grouped = grouped_by("max by (job_id, rank) (gpuscope_a) / sum without(pid) (gpuscope_b)");
    assert_eq!(grouped.into_iter().collect::<Vec<_>>(), ["job_id", "pid", "rank"]);
}
