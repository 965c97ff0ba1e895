//! The fleet's frames: a line per host, the alerts across hosts, the jobs
//! across hosts; an expanded host is drawn by the local dashboard's own
//! renderer, with one line of fleet context at the bottom.

use crate::tui::term::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::state::{Screen, ViewState};
use crate::fleet::jobs::Job;
use crate::fleet::model::{HostState, HostStatus};
use crate::fleet::table::{busy_text, job_title, marks, memory_text, sm_active_text};
use crate::model::Severity;
use crate::tui::Clock;
use crate::tui::render::{bytes_short, clean_text, fit_text};
use crate::tui::term::Lines;

pub fn draw(frame: &mut Frame, view: &ViewState, clock: &Clock) {
    let area = frame.area();
    if area.width == 0 || area.height == 0 {
        return;
    }
    let now = clock.now_ms();
    if let Screen::Host { host, local } = &view.screen {
        crate::tui::render::draw(frame, local, clock);
        let state = view.fleet.hosts.iter().find(|h| &h.host == host).map_or_else(String::new, |h| {
            let why = h.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default();
            format!("{}{why}", h.status_text(now))
        });
        let text = cell(view, &format!(" fleet: {host} ({state})  Esc back to the fleet  q quit"), area.width as usize);
        put(
            frame,
            Rect { y: area.bottom() - 1, height: 1, ..area },
            vec![Line::styled(text, Style::new().add_modifier(Modifier::REVERSED))],
            view,
        );
        return;
    }
    let w = area.width as usize;
    let body_h = (area.height as usize).saturating_sub(2);
    let mut lines = vec![header(view, w)];
    lines.extend(match &view.screen {
        Screen::Alerts { scroll } => alert_lines(view, w).into_iter().skip(*scroll).take(body_h).collect(),
        Screen::Jobs { scroll } => job_lines(view, w).into_iter().skip(*scroll).take(body_h).collect(),
        _ => host_lines(view, w, body_h, now),
    });
    put(frame, area, lines, view);
    let footer = cell(view, &footer(view), w);
    put(
        frame,
        Rect { y: area.bottom() - 1, height: 1, ..area },
        vec![Line::styled(footer, Style::new().add_modifier(Modifier::REVERSED))],
        view,
    );
}

/// Text from outside (host names, messages) made safe to draw, then the
/// lines drawn; ASCII mode gets nothing else.
fn put(frame: &mut Frame, area: Rect, lines: Vec<Line<'static>>, view: &ViewState) {
    frame.render_lines(Lines(lines), area);
    if view.options.ascii {
        frame.force_ascii();
    }
}

fn clean(view: &ViewState, s: &str) -> String {
    clean_text(s, view.options.ascii)
}

fn cell(view: &ViewState, s: &str, w: usize) -> String {
    let s = fit_text(&clean(view, s), w, if view.options.ascii { "~" } else { "…" });
    let pad = w.saturating_sub(crate::tui::render::text_width(&s));
    format!("{s}{}", " ".repeat(pad))
}

fn header(view: &ViewState, w: usize) -> Line<'static> {
    let f = &view.fleet;
    let up = f.hosts.iter().filter(|h| h.status == HostStatus::Ok).count();
    let alerts: usize = f.hosts.iter().filter_map(HostState::alert_count).sum();
    let source = match f.source {
        crate::fleet::model::Source::Direct => "direct",
        crate::fleet::model::Source::Prometheus => "prometheus",
    };
    let mut text = format!(
        "gpuscope fleet ({source})  {} hosts, {up} answering  {alerts} alerts  {} jobs  sort: {}",
        f.hosts.len(),
        f.jobs.len(),
        view.sort.title()
    );
    if let Some(c) = f.capped {
        text.push_str(&format!("  {}", c.text()));
    }
    if !view.filter.is_empty() || view.editing_filter {
        text.push_str(&format!("  filter: {}{}", view.filter, if view.editing_filter { "_" } else { "" }));
    }
    Line::styled(cell(view, &text, w), Style::new().add_modifier(Modifier::BOLD))
}

fn footer(view: &ViewState) -> String {
    if let Some(s) = &view.status {
        return format!(" {s}");
    }
    match view.screen {
        Screen::Hosts if view.editing_filter => " type to filter hosts  Enter keep  Esc clear".into(),
        Screen::Hosts => " Enter host  a alerts  J jobs  s sort  / filter  q quit".into(),
        _ => " Up/Down scroll  Esc back  q quit".into(),
    }
}

const HOST_W: usize = 22;
const MEMORY_W: usize = 20;
const SM_W: usize = 10;
/// From this width the SM activity column fits with a memory bar of 16.
const SM_FROM: usize = 100;
/// Less room than this beside a stale host's figures, and its reason
/// takes the place of its memory and alerts.
const REASON_W: usize = 40;

fn host_lines(view: &ViewState, w: usize, body_h: usize, now: u64) -> Vec<Line<'static>> {
    let hosts = view.hosts();
    let sm_w = if w >= SM_FROM { SM_W } else { 0 };
    let bar_w = w.saturating_sub(2 + HOST_W + 13 + 10 + sm_w + MEMORY_W + 1 + 6).min(40);
    let title = format!(
        "  {}{}{}{}{}{}ALERTS",
        cell(view, "HOST", HOST_W),
        cell(view, "STATUS", 13),
        cell(view, "GPUS BUSY", 10),
        cell(view, "SM ACTIVE", sm_w),
        cell(view, "MEMORY", MEMORY_W),
        " ".repeat(bar_w + if bar_w > 0 { 1 } else { 0 })
    );
    let mut lines = vec![Line::styled(cell(view, &title, w), Style::new().add_modifier(Modifier::DIM))];
    if hosts.is_empty() {
        lines.push(Line::raw(format!("  no host matches \"{}\" (Esc clears the filter)", clean(view, &view.filter))));
    }
    let page = body_h.saturating_sub(1).max(1);
    let offset = (view.selected + 1).saturating_sub(page);
    for (i, h) in hosts.iter().enumerate().skip(offset).take(page) {
        lines.push(host_line(view, h, i == view.selected, [sm_w, bar_w], w, now));
    }
    lines
}

/// `widths`: the SM activity column's and the memory bar's, 0 where left out.
fn host_line(view: &ViewState, h: &HostState, selected: bool, widths: [usize; 2], w: usize, now: u64) -> Line<'static> {
    let [sm_w, bar_w] = widths;
    let mark = if selected { "> " } else { "  " };
    let status_style = match h.status {
        HostStatus::Ok => Style::new(),
        HostStatus::Waiting => Style::new().add_modifier(Modifier::DIM),
        HostStatus::Stale | HostStatus::Unreachable => color(view, Color::Red).add_modifier(Modifier::BOLD),
    };
    let mut spans = vec![
        Span::raw(mark.to_string()),
        Span::raw(format!("{} ", cell(view, &h.host, HOST_W - 1))),
        Span::styled(cell(view, &h.status_text(now), 13), status_style),
    ];
    let dim = Style::new().add_modifier(Modifier::DIM);
    let room = |spans: &[Span]| w.saturating_sub(spans.iter().map(Span::width).sum::<usize>());
    // A host without figures (down, or none yet) gives their room to why.
    if h.summary.is_none() {
        if let Some(why) = h.error.as_deref().filter(|_| room(&spans) > 3) {
            spans.push(Span::styled(cell(view, why, room(&spans)), dim));
        }
        return finish(Line::from(spans), selected);
    }
    spans.push(Span::raw(cell(view, &busy_text(h), 10)));
    // A stale host's reason, where the old figures would leave it too
    // little room, takes the place of its memory and alerts.
    let beside = room(&spans).saturating_sub(sm_w + MEMORY_W + bar_w + 1 + 6 + 2);
    if let Some(why) = h.error.as_deref().filter(|_| beside < REASON_W && room(&spans) > 3) {
        spans.push(Span::styled(cell(view, why, room(&spans)), dim));
        return finish(Line::from(spans), selected);
    }
    spans.extend([Span::raw(cell(view, &sm_active_text(h), sm_w)), Span::raw(cell(view, &memory_text(h), MEMORY_W))]);
    if bar_w > 0 {
        spans.push(Span::styled(bar(view, h, bar_w), color(view, Color::Cyan)));
        spans.push(Span::raw(" "));
    }
    let alerts = h.alert_count().map_or_else(|| "n/a".into(), |n| n.to_string());
    let alert_style = if h.alert_count().unwrap_or(0) > 0 { color(view, Color::Yellow) } else { Style::new() };
    spans.push(Span::styled(alerts, alert_style));
    let used: usize = spans.iter().map(|s| s.width()).sum();
    // The error if there is one, else whether the node sent more than is kept.
    let note = h.error.clone().or_else(|| h.capped.map(|c| c.text()));
    if let Some(note) = note.filter(|_| w > used + 3) {
        let text = format!("  {}", cell(view, &note, w - used - 2));
        spans.push(Span::styled(text, dim));
    }
    finish(Line::from(spans), selected)
}

fn finish(line: Line<'static>, selected: bool) -> Line<'static> {
    if selected { line.style(Style::new().add_modifier(Modifier::REVERSED)) } else { line }
}

fn bar(view: &ViewState, h: &HostState, w: usize) -> String {
    let (full, empty) = if view.options.ascii { ('#', '.') } else { ('█', '░') };
    match h.memory() {
        Some((u, t)) if t > 0 => {
            let n = ((u as f64 / t as f64) * w as f64).round() as usize;
            let n = n.min(w);
            format!("{}{}", full.to_string().repeat(n), empty.to_string().repeat(w - n))
        }
        _ => format!("{:<w$}", "n/a"),
    }
}

fn color(view: &ViewState, c: Color) -> Style {
    if view.options.color { Style::new().fg(c) } else { Style::new() }
}

fn alert_lines(view: &ViewState, w: usize) -> Vec<Line<'static>> {
    let mut all: Vec<(&str, &crate::model::Alert)> = view
        .fleet
        .hosts
        .iter()
        .filter_map(|h| Some((h.host.as_str(), h.snapshot.as_ref()?)))
        .flat_map(|(host, s)| s.alerts.iter().map(move |a| (host, a)))
        .collect();
    all.sort_by(|a, b| b.1.severity.cmp(&a.1.severity).then_with(|| a.0.cmp(b.0)));
    let mut lines = vec![Line::styled(
        format!("alerts across {} hosts: {}", view.fleet.hosts.len(), all.len()),
        Style::new().add_modifier(Modifier::DIM),
    )];
    for (host, a) in all {
        let sev = match a.severity {
            Severity::Critical => ("CRIT", color(view, Color::Red)),
            Severity::Warning => ("WARN", color(view, Color::Yellow)),
            Severity::Info => ("info", Style::new()),
        };
        let gpu = a.gpu.map_or_else(String::new, |g| format!(" gpu {g}"));
        let text = format!(" {}{gpu}  {}", cell(view, host, HOST_W), a.message);
        lines.push(Line::from(vec![
            Span::styled(sev.0.to_string(), sev.1),
            Span::raw(cell(view, &text, w.saturating_sub(4))),
        ]));
    }
    lines
}

fn job_lines(view: &ViewState, w: usize) -> Vec<Line<'static>> {
    if view.fleet.jobs.is_empty() {
        return vec![Line::raw("no distributed jobs seen (ranks report their job through the allocator probe)")];
    }
    let mut lines = Vec::new();
    for job in &view.fleet.jobs {
        lines.push(Line::styled(cell(view, &job_title(job), w), Style::new().add_modifier(Modifier::BOLD)));
        // The data wait only where a rank reports it, as `-1` shows it.
        let data = job.ranks.iter().any(|r| r.data_wait.is_some());
        let header = if data {
            "  RANK HOST                PID      GPU ALLOC   RESERVED FRAG  UTIL  DATA  MARK"
        } else {
            "  RANK HOST                PID      GPU ALLOC   RESERVED FRAG  UTIL  MARK"
        };
        lines.push(Line::styled(cell(view, header, w), Style::new().add_modifier(Modifier::DIM)));
        lines.extend(job.ranks.iter().map(|r| rank_line(view, job, r, data, w)));
        lines.push(Line::raw(""));
    }
    lines
}

fn rank_line(view: &ViewState, job: &Job, r: &crate::fleet::jobs::RankEntry, data: bool, w: usize) -> Line<'static> {
    let na = || "n/a".to_string();
    let percent = |f: f64| format!("{:.0}%", f * 100.0);
    let text = format!(
        "  {}{}{}{}{}{}{}{}{}",
        cell(view, &r.rank.map_or_else(na, |x| x.to_string()), 5),
        cell(view, &r.host, 20),
        cell(view, &r.pid.to_string(), 9),
        cell(view, &r.gpu.map_or_else(na, |g| g.to_string()), 4),
        cell(view, &r.allocated.map_or_else(na, bytes_short), 8),
        cell(view, &r.reserved.map_or_else(na, bytes_short), 9),
        cell(view, &r.fragmentation.map_or_else(na, percent), 6),
        cell(view, &r.utilization.map_or_else(na, |u| format!("{u}%")), 6),
        if data { cell(view, &r.data_wait.map_or_else(na, percent), 6) } else { String::new() },
    );
    let marks = marks(job, r);
    let style = if marks.is_empty() { Style::new() } else { color(view, Color::Yellow) };
    // The paragraph clips what is wider than the screen.
    let _ = w;
    Line::from(vec![Span::raw(text), Span::styled(marks, style)])
}
