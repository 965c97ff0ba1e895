//! A chart drawn with whole cells: filled layers stacked back to front
//! (the tallest first, so smaller figures show in front of larger ones),
//! then marker layers on top. Each layer has its own symbol, so the chart
//! reads without colour and in ASCII.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

#[derive(Debug, Clone)]
pub struct Layer {
    /// One value per column, oldest left; `None` draws nothing.
    pub values: Vec<Option<f64>>,
    pub symbol: &'static str,
    pub style: Style,
    /// Filled from the bottom up to the value, else one mark at the value.
    pub fill: bool,
}

/// `height` lines of `width` cells, top line first.
pub fn plot(layers: &[Layer], max: f64, width: usize, height: usize) -> Vec<Line<'static>> {
    let mut grid: Vec<Vec<(&'static str, Style)>> = vec![vec![(" ", Style::new()); width]; height];
    if height == 0 || width == 0 || max.is_nan() || max <= 0.0 {
        return grid.into_iter().map(|_| Line::raw(" ".repeat(width))).collect();
    }
    let filled = layers.iter().filter(|l| l.fill);
    let marks = layers.iter().filter(|l| !l.fill);
    for layer in filled.chain(marks) {
        for (x, v) in layer.values.iter().enumerate().take(width) {
            let Some(v) = v.filter(|v| v.is_finite()) else { continue };
            let share = (v / max).clamp(0.0, 1.0);
            if layer.fill {
                let cells = (share * height as f64).round() as usize;
                for row in grid.iter_mut().rev().take(cells) {
                    row[x] = (layer.symbol, layer.style);
                }
            } else {
                let from_bottom = ((share * height as f64).ceil() as usize).clamp(1, height);
                grid[height - from_bottom][x] = (layer.symbol, layer.style);
            }
        }
    }
    grid.into_iter().map(|row| Line::from(runs(&row))).collect()
}

/// A row as one span per run of equal cells, not one per cell: drawing
/// pays per span (a style to patch, a position to find).
fn runs(row: &[(&'static str, Style)]) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    let mut rest = row;
    while let Some(&(symbol, style)) = rest.first() {
        let n = rest.iter().take_while(|&&cell| cell == (symbol, style)).count();
        spans.push(if n == 1 { Span::styled(symbol, style) } else { Span::styled(symbol.repeat(n), style) });
        rest = &rest[n..];
    }
    spans
}

/// Samples spread over `width` columns by time, from `from_ms` to `to_ms`;
/// `time` gives the first and last instant a sample stands for (a bucket
/// of history covers every column of its slot); several samples in one
/// column are combined with `merge`.
pub fn columns<T>(
    points: impl IntoIterator<Item = T>,
    from_ms: u64,
    to_ms: u64,
    width: usize,
    time: impl Fn(&T) -> (u64, u64),
    value: impl Fn(&T) -> Option<f64>,
    merge: Merge,
) -> Vec<Option<f64>> {
    let mut acc: Vec<(f64, usize)> = vec![(0.0, 0); width];
    let span = to_ms.saturating_sub(from_ms).max(1) as f64;
    let x = |t: u64| ((((t - from_ms) as f64 / span) * width as f64) as usize).min(width.saturating_sub(1));
    for p in points {
        let (first, last) = time(&p);
        let Some(v) = value(&p) else { continue };
        if width == 0 || last < from_ms || last > to_ms {
            continue;
        }
        for (sum, n) in &mut acc[x(first.max(from_ms))..=x(last)] {
            *sum = match merge {
                Merge::Max if *n > 0 => sum.max(v),
                Merge::Max => v,
                Merge::Mean => *sum + v,
            };
            *n += 1;
        }
    }
    acc.into_iter()
        .map(|(v, n)| match (n, merge) {
            (0, _) => None,
            (n, Merge::Mean) => Some(v / n as f64),
            (_, Merge::Max) => Some(v),
        })
        .collect()
}

#[derive(Debug, Clone, Copy)]
pub enum Merge {
    /// Memory: a peak inside a column must show.
    Max,
    /// Utilisation: the column's average.
    Mean,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: &[Line]) -> Vec<String> {
        lines.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn fills_stack_and_marks_sit_on_top() {
        let layer = |values: Vec<Option<f64>>, symbol, fill| Layer { values, symbol, style: Style::new(), fill };
        let lines = plot(
            &[
                layer(vec![Some(4.0), Some(2.0), None, Some(4.0)], "+", true),
                layer(vec![Some(2.0), Some(1.0), None, Some(0.0)], "#", true),
                layer(vec![Some(4.0), Some(0.0), Some(2.0), None], "*", false),
            ],
            4.0,
            4,
            4,
        );
        assert_eq!(text(&lines), ["*  +", "+  +", "#+*+", "#* +"]);
    }

    #[test]
    fn equal_cells_make_one_span() {
        let (a, b) = (Style::new(), Style::new().bold());
        let spans = runs(&[("x", a), ("x", a), ("x", b), ("y", b), ("y", b), (" ", a)]);
        let drawn: Vec<(String, Style)> = spans.into_iter().map(|s| (s.content.into_owned(), s.style)).collect();
        assert_eq!(drawn, [("xx".into(), a), ("x".into(), b), ("yy".into(), b), (" ".into(), a)]);
        assert!(runs(&[]).is_empty());
    }

    #[test]
    fn columns_by_time() {
        let pts = [(0u64, 1.0), (10, 3.0), (50, 5.0), (99, 2.0), (150, 9.0)];
        let max = columns(pts, 0, 100, 4, |p| (p.0, p.0), |p| Some(p.1), Merge::Max);
        assert_eq!(max, [Some(3.0), None, Some(5.0), Some(2.0)]);
        let mean = columns(pts, 0, 100, 4, |p| (p.0, p.0), |p| Some(p.1), Merge::Mean);
        assert_eq!(mean[0], Some(2.0));
        assert!(columns(pts, 0, 100, 0, |p| (p.0, p.0), |p| Some(p.1), Merge::Max).is_empty());
        // A bucket from 20 to 60 covers columns 0 to 2; its start before
        // the window is cut off.
        let wide = columns([(20u64, 60u64, 7.0), (0, 110, 1.0)], 0, 100, 4, |p| (p.0, p.1), |p| Some(p.2), Merge::Max);
        assert_eq!(wide, [Some(7.0), Some(7.0), Some(7.0), None]);
    }
}
