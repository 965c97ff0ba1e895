//! `fleet -1`: plain ASCII within 80 columns, a line per host, then the
//! jobs with a line per rank. Unknown figures are `n/a`.

use super::jobs::{self, Job, RankEntry};
use super::model::{Fleet, HostState};
use crate::tui::render::{bytes_short, clean_text, fit_text};

pub const WIDTH: usize = 80;

/// `s` in a column `w` wide, cut with `~` to leave at least one space
/// before the next column.
fn cell(s: &str, w: usize) -> String {
    let s = fit_text(&clean_text(s, true), w.saturating_sub(1), "~");
    format!("{s:<w$}")
}

pub fn render(fleet: &Fleet, now_ms: u64) -> String {
    let mut out = String::new();
    let up = fleet.hosts.iter().filter(|h| h.status == super::model::HostStatus::Ok).count();
    out.push_str(&format!("gpuscope fleet: {} hosts, {up} answering\n", fleet.hosts.len()));
    if let Some(c) = fleet.capped {
        out.push_str(&format!("{}\n", c.text()));
    }
    out.push_str(&format!(
        "{}{}{}{}{}\n",
        cell("HOST", 25),
        cell("STATUS", 13),
        cell("GPUS BUSY", 10),
        cell("MEMORY", 24),
        "ALERTS"
    ));
    for h in &fleet.hosts {
        out.push_str(&host_line(h, now_ms));
        out.push('\n');
        for note in h.error.iter().cloned().chain(h.capped.map(|c| c.text())).chain(health_text(h)) {
            out.push_str(&format!("  {}\n", fit_text(&clean_text(&note, true), WIDTH - 2, "~")));
        }
    }
    if fleet.jobs.is_empty() {
        out.push_str("no distributed jobs seen\n");
    }
    for job in &fleet.jobs {
        out.push_str(&job_text(job));
    }
    out
}

/// "health CRITICAL: GPU 3: a row remapping failed ...": the host's worst
/// GPU, where its health is not ok.
pub fn health_text(h: &HostState) -> Option<String> {
    let worst = h.health.as_ref().filter(|w| w.verdict != crate::model::HealthVerdict::Ok)?;
    let level = if worst.verdict == crate::model::HealthVerdict::Critical { "CRITICAL" } else { "warning" };
    let reason = worst.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
    Some(format!("health {level}: GPU {}{reason}", worst.gpu))
}

pub fn busy_text(h: &HostState) -> String {
    h.busy_gpus().map_or_else(|| "n/a".into(), |(b, n)| format!("{b}/{n}"))
}

pub fn sm_active_text(h: &HostState) -> String {
    h.sm_active().map_or_else(|| "n/a".into(), |p| format!("{p}%"))
}

pub fn memory_text(h: &HostState) -> String {
    h.memory().map_or_else(
        || "n/a".into(),
        |(u, t)| {
            let pct = if t > 0 { format!(" {:>3.0}%", u as f64 * 100.0 / t as f64) } else { String::new() };
            format!("{}/{}{pct}", bytes_short(u), bytes_short(t))
        },
    )
}

fn host_line(h: &HostState, now_ms: u64) -> String {
    let alerts = h.alert_count().map_or_else(|| "n/a".into(), |n| n.to_string());
    format!(
        "{}{}{}{}{}",
        cell(&h.host, 25),
        cell(&h.status_text(now_ms), 13),
        cell(&busy_text(h), 10),
        cell(&memory_text(h), 24),
        alerts
    )
}

pub fn job_title(job: &Job) -> String {
    let world = job.world_size.map_or_else(|| "world n/a".into(), |w| format!("world {w}"));
    let hosts = {
        let mut h: Vec<&str> = job.ranks.iter().map(|r| r.host.as_str()).collect();
        h.sort_unstable();
        h.dedup();
        h.len()
    };
    let seen = match jobs::missing_text(job) {
        Some(missing) => missing,
        None => "all ranks seen".into(),
    };
    format!("job {}  {world}  on {hosts} host(s)  {seen}", job.job)
}

pub fn marks(job: &Job, r: &RankEntry) -> String {
    let mut m = Vec::new();
    if r.rank.is_some() && r.rank == job.slowest_rank {
        m.push("slowest");
    }
    if r.rank.is_some() && r.rank == job.fullest_rank {
        m.push("fullest");
    }
    // Sorted: a job of thousands of ranks is drawn a rank at a time.
    if r.rank.is_some_and(|x| job.duplicate_ranks.binary_search(&x).is_ok()) {
        m.push("dup");
    }
    if r.stale {
        m.push("stale");
    }
    m.join(",")
}

fn job_text(job: &Job) -> String {
    let mut out = format!("\n{}\n", fit_text(&clean_text(&job_title(job), true), WIDTH, "~"));
    // The data wait only where a rank reports it: most jobs' probes do not.
    let data = job.ranks.iter().any(|r| r.data_wait.is_some());
    out.push_str("  RANK HOST              PID      GPU ALLOC   RESERVD FRAG  UTIL ");
    out.push_str(if data { "DATA MARK\n" } else { "MARK\n" });
    for r in &job.ranks {
        let na = || "n/a".to_string();
        let percent = |f: f64| format!("{:.0}%", f * 100.0);
        let line = format!(
            "  {}{}{}{}{}{}{}{}{}{}",
            cell(&r.rank.map_or_else(na, |x| x.to_string()), 5),
            cell(&r.host, 18),
            cell(&r.pid.to_string(), 9),
            cell(&r.gpu.map_or_else(na, |g| g.to_string()), 4),
            cell(&r.allocated.map_or_else(na, bytes_short), 8),
            cell(&r.reserved.map_or_else(na, bytes_short), 8),
            cell(&r.fragmentation.map_or_else(na, percent), 6),
            cell(&r.utilization.map_or_else(na, |u| format!("{u}%")), 5),
            if data { cell(&r.data_wait.map_or_else(na, percent), 5) } else { String::new() },
            marks(job, r)
        );
        out.push_str(fit_text(line.trim_end(), WIDTH, "~").as_str());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host name of 25 characters or more is cut, and a space always
    /// parts it from its status.
    #[test]
    fn a_long_host_name_never_runs_into_its_status() {
        let mut h = HostState::new("gpu-node-017.cluster.example.org:10983".into());
        h.failed("cannot connect: Connection refused (os error 111)".into(), 1000);
        let line = host_line(&h, 6000);
        assert!(line.starts_with("gpu-node-017.cluster.ex~ down 5.0s "), "{line}");
        let mut h = HostState::new("x".repeat(25));
        h.failed("no answer within 2s".into(), 0);
        assert!(host_line(&h, 0).starts_with(&format!("{}~ down", "x".repeat(23))), "{}", host_line(&h, 0));
    }

    fn job(data_wait: [Option<f64>; 2]) -> Job {
        let rank = |r: u32, data_wait| RankEntry {
            rank: Some(r),
            host: "node1".into(),
            pid: 100 + r,
            gpu: Some(r),
            allocated: None,
            reserved: None,
            fragmentation: None,
            utilization: Some(90),
            gpu_memory_ratio: None,
            data_wait,
            stale: false,
        };
        Job {
            job: "run-1".into(),
            world_size: Some(2),
            ranks: vec![rank(0, data_wait[0]), rank(1, data_wait[1])],
            missing_ranks: Vec::new(),
            duplicate_ranks: Vec::new(),
            slowest_rank: None,
            fullest_rank: None,
        }
    }

    /// Issue 58: a DATA column (the rank's data-wait share) where a rank
    /// reports it, `n/a` for the ranks that do not; none otherwise.
    #[test]
    fn the_data_wait_column_comes_with_the_figure() {
        let text = job_text(&job([Some(0.413), None]));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[2].ends_with("UTIL DATA MARK"), "{text}");
        assert!(lines[3].ends_with("90%  41%"), "{text}");
        assert!(lines[4].ends_with("90%  n/a"), "{text}");
        assert!(lines.iter().all(|l| l.chars().count() <= WIDTH), "{text}");
        let text = job_text(&job([None, None]));
        assert!(text.lines().nth(2).unwrap().ends_with("UTIL MARK"), "{text}");
        assert!(text.lines().nth(3).unwrap().ends_with("90%"), "{text}");
    }
}
