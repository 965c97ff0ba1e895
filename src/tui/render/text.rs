//! Fitting text into cells: display widths (not bytes, not chars), cutting
//! with a mark, padding, and keeping data strings to ASCII in ASCII mode.

use std::borrow::Cow;

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::sources::{SHOWN_FOR_INVISIBLE, is_invisible};
use crate::tui::term::printable_ascii;

pub fn width(s: &str) -> usize {
    // Most of what a frame measures is printable ASCII, a column a byte.
    if printable_ascii(s) { s.len() } else { Span::raw(s).width() }
}

/// `s` cut to `max` columns, ending in `mark` when something was cut.
pub fn fit(s: &str, max: usize, mark: &str) -> String {
    fit_cow(s, max, mark).into_owned()
}

/// `fit`, borrowing what needs no cut.
fn fit_cow<'a>(s: &'a str, max: usize, mark: &str) -> Cow<'a, str> {
    if width(s) <= max {
        return Cow::Borrowed(s);
    }
    let room = max.saturating_sub(width(mark));
    let mut out = String::new();
    let mut used = 0;
    for ch in s.chars() {
        let w = width(ch.encode_utf8(&mut [0; 4]));
        if used + w > room {
            break;
        }
        used += w;
        out.push(ch);
    }
    if width(mark) <= max {
        out.push_str(mark);
    }
    Cow::Owned(out)
}

/// Left-aligned in exactly `w` columns.
pub fn left(s: &str, w: usize, mark: &str) -> String {
    let mut out = String::new();
    push_left(&mut out, s, w, mark);
    out
}

/// Right-aligned in exactly `w` columns.
pub fn right(s: &str, w: usize, mark: &str) -> String {
    let mut out = String::new();
    push_right(&mut out, s, w, mark);
    out
}

/// `left` onto the end of `out`: a table row is built without a string
/// per cell.
pub fn push_left(out: &mut String, s: &str, w: usize, mark: &str) {
    let s = fit_cow(s, w, mark);
    out.push_str(&s);
    pad(out, w.saturating_sub(width(&s)));
}

/// `right` onto the end of `out`.
pub fn push_right(out: &mut String, s: &str, w: usize, mark: &str) {
    let s = fit_cow(s, w, mark);
    pad(out, w.saturating_sub(width(&s)));
    out.push_str(&s);
}

fn pad(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

/// Data from outside (names, commands, messages) as it may be drawn:
/// control characters never, invisible formatting characters (a
/// bidirectional override, a zero-width space) as a visible mark, and
/// non-ASCII not in ASCII mode.
pub fn clean(s: &str, ascii: bool) -> String {
    clean_cow(s, ascii).into_owned()
}

/// `clean`, borrowing what needs no change.
pub fn clean_cow(s: &str, ascii: bool) -> Cow<'_, str> {
    if printable_ascii(s) {
        return Cow::Borrowed(s);
    }
    s.chars()
        .map(|c| match c {
            c if c.is_control() => ' ',
            c if ascii && !c.is_ascii() => '?',
            c if is_invisible(c) => SHOWN_FOR_INVISIBLE,
            c => c,
        })
        .collect::<String>()
        .into()
}

/// Words filled into lines of at most `w` columns; a word longer than a
/// line is split, and wide characters count double.
pub fn wrap(s: &str, w: usize) -> Vec<String> {
    let options = textwrap::Options::new(w.max(1)).break_words(true);
    textwrap::wrap(s, options).into_iter().map(std::borrow::Cow::into_owned).collect()
}

pub fn spans_width(spans: &[Span]) -> usize {
    spans.iter().map(Span::width).sum()
}

/// `left` then `right` flush with the right edge, the gap filled with
/// `fill`; `right` goes first when both do not fit.
pub fn spread<'a>(mut left: Vec<Span<'a>>, right: Vec<Span<'a>>, w: usize, fill: &str, fill_style: Style) -> Line<'a> {
    let lw = spans_width(&left);
    let rw = spans_width(&right);
    let fill_w = width(fill).max(1);
    if lw + rw < w {
        let gap = w - lw - rw;
        left.push(Span::styled(fill.repeat(gap / fill_w) + &" ".repeat(gap % fill_w), fill_style));
        left.extend(right);
    } else if lw < w {
        left.push(Span::styled(fill.repeat((w - lw) / fill_w), fill_style));
    }
    Line::from(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_by_display_width() {
        assert_eq!(fit("python3 train.py", 10, "…"), "python3 t…");
        assert_eq!(fit("python3 train.py", 10, "~"), "python3 t~");
        assert_eq!(fit("short", 10, "…"), "short");
        assert_eq!(fit("数据处理", 5, "…"), "数据…");
        assert_eq!(fit("abc", 0, "…"), "");
        assert_eq!(left("ab", 4, "~"), "ab  ");
        assert_eq!(right("ab", 4, "~"), "  ab");
        assert_eq!(right("abcdef", 4, "~"), "abc~");
    }

    #[test]
    fn wraps_words_and_splits_the_too_long() {
        assert_eq!(wrap("python3 train.py --epochs 90", 12), ["python3", "train.py", "--epochs 90"]);
        assert_eq!(wrap("abcdefghij xy", 4), ["abcd", "efgh", "ij", "xy"]);
        assert_eq!(wrap("", 5), [""]);
        assert_eq!(wrap("数据", 1), ["数", "据"]);
        assert_eq!(wrap("user a  parent 1  CPU 3%", 16), ["user a  parent 1", "CPU 3%"]);
    }

    #[test]
    fn ascii_mode_cleans_data() {
        assert_eq!(clean("naïve\tx", true), "na?ve x");
        assert_eq!(clean("naïve", false), "naïve");
        assert_eq!(clean("evil\u{202E}txt.exe\u{200B}", false), "evil\u{FFFD}txt.exe\u{FFFD}");
        assert_eq!(clean("evil\u{202E}x", true), "evil?x");
    }

    #[test]
    fn spread_fills_the_gap_and_drops_the_right_side_when_short() {
        let line = spread(vec![Span::raw("ab")], vec![Span::raw("cd")], 8, "-", Style::new());
        assert_eq!(line.to_string(), "ab----cd");
        let line = spread(vec![Span::raw("abcdef")], vec![Span::raw("cd")], 7, "-", Style::new());
        assert_eq!(line.to_string(), "abcdef-");
    }
}
