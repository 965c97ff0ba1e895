//! Stacked bars: each segment gets its share of the cells, rounded so the
//! cells add up to the width (largest remainders win), and its own symbol,
//! so the split reads without colour.

use ratatui::style::Style;
use ratatui::text::Span;

use crate::model::Gpu;
use crate::tui::render::symbols::Symbols;
use crate::tui::render::theme::Theme;

#[derive(Debug, Clone, Copy)]
pub struct Segment {
    pub value: u64,
    pub symbol: &'static str,
    pub style: Style,
}

/// Cells per segment for a bar of `width` cells standing for `total`.
pub fn cells(values: &[u64], total: u64, width: usize) -> Vec<usize> {
    if total == 0 || width == 0 {
        return vec![0; values.len()];
    }
    let exact: Vec<f64> = values.iter().map(|&v| v.min(total) as f64 / total as f64 * width as f64).collect();
    let mut out: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
    let filled = exact.iter().sum::<f64>().round() as usize;
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    let mut missing = filled.min(width).saturating_sub(out.iter().sum());
    for i in order {
        if missing == 0 {
            break;
        }
        if exact[i] > out[i] as f64 {
            out[i] += 1;
            missing -= 1;
        }
    }
    out
}

/// `width` cells of segments; cells no segment claims stay blank.
pub fn bar(segments: &[Segment], total: u64, width: usize) -> Vec<Span<'static>> {
    let values: Vec<u64> = segments.iter().map(|s| s.value).collect();
    let counts = cells(&values, total, width);
    let mut spans: Vec<Span> = segments
        .iter()
        .zip(&counts)
        .filter(|(_, n)| **n > 0)
        .map(|(s, n)| Span::styled(s.symbol.repeat(*n), s.style))
        .collect();
    let drawn: usize = counts.iter().sum();
    if drawn < width {
        spans.push(Span::raw(" ".repeat(width - drawn)));
    }
    spans
}

/// A GPU's memory, left to right: allocated | cached | everything else
/// in use (overhead, processes without a probe, the driver's share) |
/// free. Without allocator figures: used | free. `None` when NVML gave no
/// memory figures.
pub fn gpu_segments(gpu: &Gpu, sym: &Symbols, theme: &Theme) -> Option<(Vec<Segment>, u64)> {
    let total = gpu.memory.total?;
    let free = gpu.memory.free.or_else(|| gpu.memory.used.map(|u| total.saturating_sub(u)))?;
    let in_use = total.saturating_sub(free);
    let seg = |value, symbol, style| Segment { value, symbol, style };
    let segments = match &gpu.allocator {
        Some(a) => {
            let allocated = a.allocated.unwrap_or(0).min(in_use);
            let cached = a.cached.unwrap_or(0).min(in_use - allocated);
            vec![
                seg(allocated, sym.allocated, theme.allocated),
                seg(cached, sym.cached, theme.cached),
                seg(in_use - allocated - cached, sym.other, theme.other),
                seg(free, sym.free, theme.free),
            ]
        }
        None => vec![seg(in_use, sym.used, theme.used), seg(free, sym.free, theme.free)],
    };
    Some((segments, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_add_up_to_the_width() {
        assert_eq!(cells(&[1, 1, 1], 3, 10), [4, 3, 3]);
        assert_eq!(cells(&[50, 25, 25], 100, 8), [4, 2, 2]);
        assert_eq!(cells(&[10, 0, 90], 100, 20), [2, 0, 18]);
        assert_eq!(cells(&[30], 100, 10), [3], "a part of the total fills a part of the bar");
        assert_eq!(cells(&[5, 5], 0, 10), [0, 0]);
        assert_eq!(cells(&[500], 100, 4), [4], "never past the end");
    }

    #[test]
    fn the_bar_is_exactly_as_wide_as_asked() {
        let theme = Theme::new(false);
        let s = |value, symbol| Segment { value, symbol, style: theme.used };
        let spans = bar(&[s(1, "#"), s(2, "=")], 4, 12);
        let text: String = spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(text, "###======   ");
    }
}
