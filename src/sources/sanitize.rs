use std::sync::Arc;

/// Makes a command line safe to print: a process can put anything in its
/// argv, including escape sequences that would rewrite the user's terminal
/// or title bar. Escape sequences are removed whole; other control
/// characters (newlines and tabs included) become spaces so that arguments
/// stay apart.
pub fn sanitize_command(raw: &str) -> String {
    if !has_control(raw) {
        return raw.trim().to_string();
    }
    // The stripper drops whitespace controls outright, which would glue
    // arguments together; ESC and BEL must stay for it to see where each
    // sequence ends.
    let spaced: String =
        raw.chars().map(|c| if matches!(c, '\t' | '\n' | '\r' | '\x0b' | '\x0c') { ' ' } else { c }).collect();
    let stripped = strip_ansi_escapes::strip_str(spaced);
    stripped.chars().map(|c| if c.is_control() { ' ' } else { c }).collect::<String>().trim().to_string()
}

/// `sanitize_command` for a shared text: the same `Arc`, not a copy, where
/// sanitizing would leave it as it is (nearly always). The snapshot's
/// allocator figures share the probe file's texts this way, rather than a
/// copy of each per tick.
pub fn sanitize_shared(raw: Arc<str>) -> Arc<str> {
    if !has_control(&raw) && raw.trim().len() == raw.len() {
        return raw;
    }
    sanitize_command(&raw).into()
}

/// Every escape sequence starts with a control character (ESC, or a C1
/// control such as CSI), so a line without one is already safe; that is
/// nearly every line, and the escape parser is not cheap.
fn has_control(raw: &str) -> bool {
    raw.chars().any(char::is_control)
}

/// Characters that change how text around them is shown without showing
/// themselves: bidirectional overrides and isolates, zero-width spaces and
/// joiners, the byte order mark, and every other format character
/// (general category Cf), plus the line and paragraph separators. A
/// command line can use them to pass for another (`U+202E` shows
/// `evil\u{202E}txt.exe` as `evilexe.txt`).
pub fn is_invisible(c: char) -> bool {
    use unicode_general_category::{GeneralCategory, get_general_category};
    !c.is_ascii()
        && matches!(
            get_general_category(c),
            GeneralCategory::Format | GeneralCategory::LineSeparator | GeneralCategory::ParagraphSeparator
        )
}

/// What a text output shows for an invisible character: a mark people see.
pub const SHOWN_FOR_INVISIBLE: char = '\u{FFFD}';

/// Text made safe to show: invisible characters (see `is_invisible`)
/// become U+FFFD and control characters a space. Borrowed when there is
/// nothing to change, which is nearly always.
pub fn visible(s: &str) -> std::borrow::Cow<'_, str> {
    if s.chars().all(|c| !c.is_control() && !is_invisible(c)) {
        return std::borrow::Cow::Borrowed(s);
    }
    let shown = s.chars().map(|c| match c {
        c if c.is_control() => ' ',
        c if is_invisible(c) => SHOWN_FOR_INVISIBLE,
        c => c,
    });
    std::borrow::Cow::Owned(shown.collect())
}

/// The most characters kept of a name a process gives (its job key, its
/// user's name, as label values): a torchrun run id or
/// `MASTER_ADDR:MASTER_PORT` fits with room to spare, and a Prometheus's
/// `label_value_length_limit` is rarely set lower.
pub const NAME_MAX_CHARS: usize = 128;

/// A text from a process made fit for a label or a one-line cell: each
/// run of whitespace and control characters one space (none at the ends),
/// invisible characters as U+FFFD, and at most `max_chars` characters, the
/// last an ellipsis where the text was cut. Every Prometheus label value a
/// process supplies goes through here: each distinct value is a new series,
/// and a Prometheus with `label_value_length_limit` rejects the whole
/// scrape over one long value. Borrowed when the text is already tame.
pub fn bounded(raw: &str, max_chars: usize) -> std::borrow::Cow<'_, str> {
    let mut chars = 0;
    let mut tame = true;
    let mut after_space = true;
    for c in raw.chars() {
        let space = c.is_whitespace() || c.is_control();
        chars += 1;
        if chars > max_chars || is_invisible(c) || (space && (c != ' ' || after_space)) {
            tame = false;
            break;
        }
        after_space = space;
    }
    if tame && !after_space || raw.is_empty() {
        return std::borrow::Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len().min(max_chars * 4));
    let mut chars = 0;
    for word in raw.split(|c: char| c.is_whitespace() || c.is_control()).filter(|w| !w.is_empty()) {
        for c in (chars > 0).then_some(' ').into_iter().chain(word.chars()) {
            if chars == max_chars {
                out.pop();
                out.push('…');
                return std::borrow::Cow::Owned(out);
            }
            out.push(if is_invisible(c) { SHOWN_FOR_INVISIBLE } else { c });
            chars += 1;
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_and_controls_go() {
        assert_eq!(sanitize_command("python\ttrain.py\n--lr 3e-4"), "python train.py --lr 3e-4");
        assert_eq!(sanitize_command("evil\x1b[2J\x1b]0;pwned\x07 cmd"), "evil cmd");
        assert_eq!(sanitize_command("bell\x07\x1b[31mred\x1b[0m"), "bellred");
        assert_eq!(sanitize_command("naïve 日本"), "naïve 日本");
        assert_eq!(sanitize_command(" python  train.py "), "python  train.py");
        assert!(!sanitize_command("c1\u{9b}2Jcsi").chars().any(char::is_control), "a C1 control takes the slow path");
    }

    #[test]
    fn invisible_format_characters_become_visible_marks() {
        for c in ['\u{202A}', '\u{202E}', '\u{2066}', '\u{2069}', '\u{200E}', '\u{200F}', '\u{200B}', '\u{200D}'] {
            assert!(is_invisible(c), "{:04X}", c as u32);
        }
        for c in ['\u{2060}', '\u{FEFF}', '\u{00AD}', '\u{061C}', '\u{E0001}', '\u{2028}', '\u{2029}'] {
            assert!(is_invisible(c), "{:04X}", c as u32);
        }
        for c in ['a', ' ', 'é', '日', '😀', '\u{0301}'] {
            assert!(!is_invisible(c), "{c}");
        }
        assert_eq!(visible("python train.py"), "python train.py");
        assert!(matches!(visible("naïve 日本"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(visible("evil\u{202E}txt.exe"), "evil\u{FFFD}txt.exe");
        assert_eq!(visible("zero\u{200B}width\u{FEFF}"), "zero\u{FFFD}width\u{FFFD}");
        assert_eq!(visible("tab\there"), "tab here");
    }
}

#[cfg(test)]
mod bounded_tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn tame_text_is_borrowed_and_the_rest_cut_and_shown() {
        assert!(matches!(bounded("10.1.2.3:29500", 8 + 8), std::borrow::Cow::Borrowed(_)));
        assert_eq!(bounded("a  b\t\nc ", 10), "a b c");
        assert_eq!(bounded(" x", 10), "x");
        assert_eq!(bounded("job\u{202E}cba", 10), "job\u{FFFD}cba");
        assert_eq!(bounded("abcdef", 4), "abc…");
        assert_eq!(bounded("abcd", 4), "abcd");
        assert_eq!(bounded("", 4), "");
        assert_eq!(bounded("  ", 4), "");
    }

    proptest! {
        #[test]
        fn any_text_comes_out_short_visible_and_on_one_line(raw in any::<String>(), max in 1usize..200) {
            let out = bounded(&raw, max);
            prop_assert!(out.chars().count() <= max);
            prop_assert!(!out.chars().any(|c| c.is_control() || is_invisible(c) || (c.is_whitespace() && c != ' ')));
            prop_assert!(!out.starts_with(' ') && !out.ends_with(' ') && !out.contains("  "));
            prop_assert_eq!(bounded(&out, max), out.clone(), "bounding is idempotent");
        }
    }
}
