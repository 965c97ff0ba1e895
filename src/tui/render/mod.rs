//! One frame from the state: the layout, then each part. Drawing reads
//! only the state and the clock, never the driver, so a frame costs the
//! same whatever NVML is doing.

mod alert_list;
mod alerts;
mod bar;
mod chart;
mod columns;
mod confirm;
mod detail;
mod environ;
mod footer;
mod format;
mod gpus;
mod header;
mod help;
mod hints;
mod layout;
mod mig;
mod pipeline;
mod processes;
mod segments;
mod sort_menu;
mod symbols;
mod text;
mod theme;
mod trend;

use crate::tui::term::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};

use crate::model::Snapshot;
use crate::tui::mouse::Hits;
use crate::tui::options::Clock;
use crate::tui::state::{State, View};
pub use format::interval as interval_text;
pub use format::{bytes_short, duration_short};
pub use help::{KEYS, REPLAY_KEYS};
pub use layout::{MIN_HEIGHT, MIN_WIDTH};
use symbols::Symbols;
pub use text::{clean as clean_text, fit as fit_text, width as text_width};
use theme::Theme;

/// What every part draws from.
pub struct Ctx<'a> {
    pub state: &'a State,
    pub snap: Option<&'a Snapshot>,
    pub now_ms: u64,
    pub clock: &'a Clock,
    pub sym: &'static Symbols,
    pub theme: Theme,
    /// The process rows, filtered and sorted once per frame: the layout,
    /// the table and the footer all ask.
    pub rows: Vec<crate::tui::rows::Row<'a>>,
}

impl Ctx<'_> {
    /// Text from outside, fit to draw.
    pub fn clean(&self, s: &str) -> String {
        text::clean(s, self.state.ascii)
    }

    /// The GPUs and their processes are `--demo`'s.
    pub fn simulated(&self) -> bool {
        self.snap.is_some_and(|s| s.simulated)
    }
}

/// Draws the whole screen; returns how many process rows fit (a page).
pub fn draw(frame: &mut Frame, state: &State, clock: &Clock) -> usize {
    draw_with_hits(frame, state, clock).0
}

/// `draw`, and where the GPU lines and the process rows went, for the mouse.
pub fn draw_with_hits(frame: &mut Frame, state: &State, clock: &Clock) -> (usize, Hits) {
    let area = frame.area();
    let ctx = Ctx {
        state,
        snap: state.shown().map(|s| s.as_ref()),
        now_ms: clock.now_ms(),
        clock,
        sym: symbols::pick(state.ascii),
        theme: Theme::new(state.color),
        rows: state.rows(),
    };
    let mut hits = Hits::default();
    let page = if layout::too_small(area) {
        too_small(frame, area, &ctx);
        state.page
    } else {
        dashboard(frame, area, &ctx, &mut hits)
    };
    if state.ascii {
        frame.force_ascii();
    }
    (page, hits)
}

/// The table's lines: the tree adds one for each launcher on no GPU.
fn process_lines(ctx: &Ctx) -> usize {
    if ctx.state.sort.tree { crate::tui::tree::entries(&ctx.rows).len() } else { ctx.rows.len() }
}

fn dashboard(frame: &mut Frame, area: Rect, ctx: &Ctx, hits: &mut Hits) -> usize {
    let state = ctx.state;
    let Some(snap) = ctx.snap else {
        header::draw(frame, Rect { height: 1, ..area }, ctx);
        let msg = format!("waiting for the first snapshot{}", ctx.sym.ellipsis);
        let body = Rect { y: area.y + area.height / 2, height: 1, ..area };
        frame.render_widget(Paragraph::new(msg).centered(), body);
        footer::draw(frame, Rect { y: area.y + area.height - 1, height: 1, ..area }, ctx);
        overlays(frame, area, ctx);
        return state.page;
    };
    let gpus_w = if area.width >= layout::WIDE { area.width / 2 } else { area.width };
    let (gpus_full, gpus_compact) = gpus::heights(snap, gpus_w as usize);
    let needs = layout::Needs {
        gpus_full,
        gpus_compact,
        alerts: u16::try_from(snap.alerts.len()).unwrap_or(u16::MAX),
        process_rows: u16::try_from(process_lines(ctx)).unwrap_or(u16::MAX),
        chart: !snap.gpus.is_empty(),
    };
    let plan = layout::plan(area, needs);
    header::draw(frame, plan.header, ctx);
    alerts::draw(frame, plan.alerts, ctx, snap);
    let detail = state.views.iter().rev().find_map(|v| if let View::Detail(d) = v { Some(*d) } else { None });
    let mut page = state.page;
    if let Some(View::Environ { pid, vars }) = state.top() {
        environ::draw(frame, plan.body, ctx, *pid, vars.as_ref());
        footer::draw(frame, plan.footer, ctx);
        overlays(frame, area, ctx);
        return page;
    }
    if let Some(View::Alerts { scroll }) = state.top() {
        alert_list::draw(frame, plan.body, ctx, snap, *scroll);
        footer::draw(frame, plan.footer, ctx);
        overlays(frame, area, ctx);
        return page;
    }
    if let Some(View::Segments(view)) = state.top() {
        segments::draw(frame, plan.body, ctx, *view);
        footer::draw(frame, plan.footer, ctx);
        overlays(frame, area, ctx);
        return page;
    }
    match detail {
        Some(view) => {
            let (scroll, shown) = detail::draw(frame, plan.body, ctx, snap, view);
            (hits.detail, hits.on_screen) = (Some(scroll), shown);
        }
        None => {
            gpus::draw(frame, plan.gpus, ctx, snap, plan.compact, hits);
            if let Some(chart) = plan.chart {
                trend::gpu(frame, chart, ctx);
            }
            page = processes::draw(frame, plan.processes, ctx, snap, hits);
        }
    }
    footer::draw(frame, plan.footer, ctx);
    overlays(frame, area, ctx);
    page
}

fn overlays(frame: &mut Frame, area: Rect, ctx: &Ctx) {
    match ctx.state.top() {
        Some(View::Help) => help::draw(frame, area, ctx),
        Some(View::Confirm(c)) => confirm::draw(frame, area, ctx, c),
        Some(View::SortMenu { cursor }) => sort_menu::draw(frame, area, ctx, *cursor),
        _ => {}
    }
}

fn too_small(frame: &mut Frame, area: Rect, ctx: &Ctx) {
    let msg = format!(
        "terminal too small: {}x{}, gpuscope needs {MIN_WIDTH}x{MIN_HEIGHT}. q quits.",
        area.width, area.height
    );
    let para = Paragraph::new(Line::styled(msg, ctx.theme.warn)).wrap(Wrap { trim: true });
    frame.render_widget(para, area);
}
