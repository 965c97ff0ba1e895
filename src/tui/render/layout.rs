//! Where each part of the dashboard goes for a given screen. Rows go to
//! the header and the footer first, then to alerts, then the GPUs (two
//! lines each when they fit beside a usable process table, else one), the
//! process table, and a history chart when rows remain; from 140 columns
//! the chart sits beside the GPUs instead, and takes the rows a short
//! process table leaves over.

use ratatui::layout::Rect;

/// Below this the dashboard says the terminal is too small.
pub const MIN_WIDTH: u16 = 40;
pub const MIN_HEIGHT: u16 = 10;
/// From this width the chart goes beside the GPU list.
pub const WIDE: u16 = 140;
const CHART_MIN: u16 = 7;
const CHART_MAX: u16 = 14;

/// What the parts would like to have, in rows.
#[derive(Debug, Clone, Copy)]
pub struct Needs {
    pub gpus_full: u16,
    pub gpus_compact: u16,
    pub alerts: u16,
    pub process_rows: u16,
    /// Whether there is a history to chart.
    pub chart: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub header: Rect,
    pub alerts: Rect,
    pub gpus: Rect,
    pub compact: bool,
    pub chart: Option<Rect>,
    pub processes: Rect,
    /// The whole area under the alerts: where a full-screen view goes.
    pub body: Rect,
    pub footer: Rect,
}

pub fn plan(area: Rect, needs: Needs) -> Plan {
    let header_h = area.height.min(2);
    let footer_h = area.height.saturating_sub(header_h).min(1);
    let max_alerts = if area.height >= 40 { 4 } else { 2 };
    let alerts_h = needs.alerts.min(max_alerts).min(area.height - header_h - footer_h);
    let header = Rect { height: header_h, ..area };
    let alerts = Rect { y: area.y + header_h, height: alerts_h, ..area };
    let body = Rect { y: alerts.y + alerts_h, height: area.height - header_h - footer_h - alerts_h, ..area };
    let footer = Rect { y: body.y + body.height, height: footer_h, ..area };

    let process_min = 2 + needs.process_rows.clamp(1, 3);
    let room_for_gpus = body.height.saturating_sub(process_min);
    let compact = needs.gpus_full > room_for_gpus;
    let gpus_h = if compact { needs.gpus_compact } else { needs.gpus_full }.min(body.height);

    let (gpus, chart, processes) = if area.width >= WIDE {
        let chart_want = (body.height / 3).clamp(CHART_MIN, CHART_MAX + 2);
        let top_h = gpus_h.max(chart_want).min(room_for_gpus.max(gpus_h));
        // Rows the table cannot fill go to the chart rather than stay blank.
        let process_want = (needs.process_rows.saturating_add(2)).max(process_min);
        let spare = (body.height - top_h).saturating_sub(process_want);
        let top_h = if needs.chart { top_h + spare } else { top_h };
        let left_w = area.width / 2;
        let gpus = Rect { y: body.y, height: top_h, width: left_w, ..area };
        let chart = Rect { x: area.x + left_w + 1, y: body.y, width: area.width - left_w - 1, height: top_h };
        let processes = Rect { y: body.y + top_h, height: body.height - top_h, ..area };
        (gpus, (needs.chart && chart.height >= CHART_MIN).then_some(chart), processes)
    } else {
        let rest = body.height - gpus_h;
        let process_want = (needs.process_rows + 2).clamp(process_min, 10);
        let chart_h = rest.saturating_sub(process_want).min(CHART_MAX);
        let chart_h = if needs.chart && chart_h >= CHART_MIN { chart_h } else { 0 };
        let gpus = Rect { y: body.y, height: gpus_h, ..area };
        let chart = Rect { y: body.y + gpus_h, height: chart_h, ..area };
        let processes = Rect { y: chart.y + chart_h, height: rest - chart_h, ..area };
        (gpus, (chart_h > 0).then_some(chart), processes)
    };
    Plan { header, alerts, gpus, compact, chart, processes, body, footer }
}

pub fn too_small(area: Rect) -> bool {
    area.width < MIN_WIDTH || area.height < MIN_HEIGHT
}

/// A box of at most `w` x `h` in the middle of `area`.
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs(gpus: u16, procs: u16, alerts: u16) -> Needs {
        Needs { gpus_full: 1 + 2 * gpus, gpus_compact: 2 + gpus, alerts, process_rows: procs, chart: true }
    }

    #[test]
    fn eight_gpus_go_compact_at_80x24_and_full_at_200x50() {
        let small = plan(Rect::new(0, 0, 80, 24), needs(8, 8, 0));
        assert!(small.compact);
        assert_eq!(small.gpus.height, 10);
        assert!(small.processes.height >= 5);
        let big = plan(Rect::new(0, 0, 200, 50), needs(8, 8, 1));
        assert!(!big.compact);
        assert!(big.gpus.height >= 17, "{big:?}");
        assert!(big.chart.is_some_and(|c| c.x >= 100 && c.height == big.gpus.height));
        assert_eq!(big.processes.height, 10, "eight rows, a title and a header: {big:?}");
    }

    #[test]
    fn parts_tile_the_screen() {
        for (w, h) in [(80, 24), (200, 50), (40, 10), (120, 40)] {
            for g in [1, 2, 4, 8] {
                let p = plan(Rect::new(0, 0, w, h), needs(g, 4, 3));
                let chart = if w >= WIDE { 0 } else { p.chart.map_or(0, |c| c.height) };
                let total =
                    p.header.height + p.alerts.height + p.gpus.height + chart + p.processes.height + p.footer.height;
                assert_eq!(total, h, "{w}x{h}, {g} GPUs: {p:?}");
            }
        }
    }

    #[test]
    fn a_chart_at_80x24_only_with_few_gpus() {
        assert!(plan(Rect::new(0, 0, 80, 24), needs(1, 2, 0)).chart.is_some());
        assert!(plan(Rect::new(0, 0, 80, 24), needs(4, 4, 0)).chart.is_none());
        let no_history = Needs { chart: false, ..needs(1, 2, 0) };
        assert!(plan(Rect::new(0, 0, 80, 24), no_history).chart.is_none());
        assert!(plan(Rect::new(0, 0, 200, 50), no_history).chart.is_none());
    }

    #[test]
    fn on_a_tall_wide_screen_the_chart_takes_what_a_short_table_leaves() {
        let few = plan(Rect::new(0, 0, 200, 60), needs(4, 4, 0));
        assert_eq!(few.processes.height, 6, "title, header, four rows: {few:?}");
        assert!(few.chart.is_some_and(|c| c.height == few.gpus.height && c.height > 40), "{few:?}");
        let many = plan(Rect::new(0, 0, 200, 60), needs(4, 200, 0));
        assert!(many.processes.height >= 40, "a long table keeps the room: {many:?}");
        let no_history = plan(Rect::new(0, 0, 200, 60), Needs { chart: false, ..needs(4, 4, 0) });
        assert!(no_history.processes.height > 6, "no chart to give the rows to: {no_history:?}");
    }

    #[test]
    fn tiny_screens_do_not_underflow() {
        for (w, h) in [(0, 0), (1, 1), (20, 5), (3, 2)] {
            let p = plan(Rect::new(0, 0, w, h), needs(8, 30, 9));
            assert!(p.footer.y + p.footer.height <= h);
        }
        assert!(too_small(Rect::new(0, 0, 20, 5)));
        assert_eq!(centered(Rect::new(0, 0, 10, 4), 20, 2), Rect::new(0, 1, 10, 2));
    }
}
