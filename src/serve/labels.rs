//! Label values drawn from processes: short and tame, since each distinct
//! value is a new series in every Prometheus that scrapes us.

use crate::model::Process;
use crate::sources::{NAME_MAX_CHARS, bounded};

/// Command lines longer than this are cut: enough to tell `train.py` from
/// `serve.py`, too little for a long argument list to bloat every series.
pub const COMMAND_MAX_CHARS: usize = 60;

/// The process's command line (its name when the host cannot see it),
/// on one line, cut to [`COMMAND_MAX_CHARS`] with an ellipsis, with
/// invisible formatting characters shown as U+FFFD (Grafana would apply a
/// bidirectional override).
pub fn command(p: &Process) -> String {
    let raw = p.command.as_deref().or(p.name.as_deref()).unwrap_or("");
    bounded(raw, COMMAND_MAX_CHARS).into_owned()
}

/// Any other text from a process, as a label value: see
/// [`crate::sources::bounded`].
pub fn value(raw: &str) -> std::borrow::Cow<'_, str> {
    bounded(raw, NAME_MAX_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(command: Option<&str>, name: Option<&str>) -> Process {
        Process { name: name.map(Into::into), command: command.map(Into::into), ..Process::bare(1) }
    }

    #[test]
    fn short_commands_keep_their_words_on_one_line() {
        let p = process(Some("  python3\ttrain.py\n--lr \u{7}3  "), None);
        assert_eq!(command(&p), "python3 train.py --lr 3");
        assert_eq!(command(&process(None, Some("vllm"))), "vllm");
        assert_eq!(command(&process(None, None)), "");
        assert_eq!(command(&process(Some("evil\u{202E}txt.exe\u{200B}"), None)), "evil\u{FFFD}txt.exe\u{FFFD}");
    }

    #[test]
    fn long_commands_are_cut_to_the_limit_with_an_ellipsis() {
        let exactly = "x".repeat(COMMAND_MAX_CHARS);
        assert_eq!(command(&process(Some(&exactly), None)), exactly);
        let long = format!("torchrun --nproc-per-node 8 {} --config é", "a/".repeat(40));
        let cut = command(&process(Some(&long), None));
        assert_eq!(cut.chars().count(), COMMAND_MAX_CHARS);
        assert!(cut.ends_with('…') && cut.starts_with("torchrun --nproc-per-node 8 a/a/"), "{cut}");
        let wide = "é".repeat(100);
        assert_eq!(command(&process(Some(&wide), None)), format!("{}…", "é".repeat(COMMAND_MAX_CHARS - 1)));
    }
}
