//! `gpuscope completions SHELL` and `gpuscope man`: shell completions and
//! the man page, generated from the same clap definitions that parse the
//! flags, so they cannot drift from them.

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

/// The completion script for `shell`, as text.
pub fn completions(shell: Shell) -> String {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "gpuscope", &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The man page (roff), `gpuscope(1)`, with every subcommand in it.
pub fn man_page() -> std::io::Result<String> {
    let cmd = Cli::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut out)?;
    // Each subcommand's own flags, under a section of its own (nested
    // ones too): one page for the whole tool, as `man gpuscope` readers
    // expect.
    sections(&cmd, "GPUSCOPE", &mut out)?;
    keys(&mut out);
    exit_status(&mut out);
    examples(&mut out);
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Commands a new user tries first; each is checked to parse (tests).
const EXAMPLES: &[(&str, &str)] = &[
    ("gpuscope --demo", "The dashboard on simulated GPUs: every view without a GPU or a driver."),
    ("gpuscope", "The dashboard on this machine's GPUs."),
    ("gpuscope -1", "One snapshot as a table, as nvidia-smi prints it, then exit."),
    ("gpuscope --json", "One snapshot as JSON (see assets/snapshot.schema.json)."),
    ("gpuscope --query-gpu=index,memory.used --format=csv", "nvidia-smi's query mode, same fields."),
    ("gpuscope run -- python train.py", "Start a PyTorch job with the allocator probe in it."),
    ("gpuscope check --for 30s", "Watch for 30 seconds; exit 0, 1 or 2 by the worst alert."),
    ("gpuscope record run.ndjson.zst --duration 1h", "Record an hour of snapshots."),
    ("gpuscope replay run.ndjson.zst", "Play a recording back in the dashboard."),
    ("gpuscope serve --listen 127.0.0.1:10983", "Serve Prometheus metrics on /metrics."),
];

/// The dashboard's keys, from the table its own help (`?`) draws.
fn keys(out: &mut Vec<u8>) {
    use crate::tui::render::{KEYS, REPLAY_KEYS};
    out.extend_from_slice(b".SH KEYS\nIn the dashboard (press ? for this list):\n");
    tagged(out, KEYS.iter().map(|(key, what)| (roff_text(key), *what)));
    out.extend_from_slice(b".PP\nIn gpuscope replay, these come first; K, m, M and A are off:\n");
    tagged(out, REPLAY_KEYS.iter().map(|(key, what)| (roff_text(key), *what)));
}

fn exit_status(out: &mut Vec<u8>) {
    out.extend_from_slice(b".SH \"EXIT STATUS\"\n");
    tagged(out, crate::exit::MEANINGS.iter().map(|(status, meaning)| (status.to_string(), *meaning)));
}

fn examples(out: &mut Vec<u8>) {
    out.extend_from_slice(b".SH EXAMPLES\n");
    tagged(out, EXAMPLES.iter().map(|(command, what)| (roff_text(command), *what)));
}

/// One `.TP` paragraph each: the tag in bold (already roff text), then
/// what it means.
fn tagged<'a>(out: &mut Vec<u8>, rows: impl Iterator<Item = (String, &'a str)>) {
    for (tag, what) in rows {
        out.extend_from_slice(format!(".TP\n\\fB{tag}\\fR\n{}\n", roff_text(what)).as_bytes());
    }
}

fn sections(cmd: &clap::Command, path: &str, out: &mut Vec<u8>) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let title = format!("{path} {}", sub.get_name().to_uppercase());
        let about = sub.get_about().map(ToString::to_string).unwrap_or_default();
        out.extend_from_slice(format!(".SH \"{title}\"\n{}\n", roff_text(&about)).as_bytes());
        clap_mangen::Man::new(sub.clone()).render_options_section(out)?;
        sections(sub, &title, out)?;
    }
    Ok(())
}

/// Plain text made safe for a roff line: a leading dot or quote would be
/// read as a request, a backslash as an escape.
fn roff_text(s: &str) -> String {
    let s = s.replace('\\', "\\e").replace('-', "\\-");
    if s.starts_with(['.', '\'']) { format!("\\&{s}") } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// Every long flag of every (sub)command, as clap knows them.
    fn long_flags(cmd: &clap::Command) -> Vec<String> {
        let mut flags: Vec<String> =
            cmd.get_arguments().filter_map(|a| a.get_long()).map(|l| format!("--{l}")).collect();
        for sub in cmd.get_subcommands() {
            flags.extend(long_flags(sub));
        }
        flags
    }

    #[test]
    fn completions_know_every_flag_and_subcommand() {
        let cmd = Cli::command();
        let flags = long_flags(&cmd);
        assert!(flags.contains(&"--json".to_string()) && flags.contains(&"--query-gpu".to_string()));
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let script = completions(shell);
            for flag in &flags {
                let bare = flag.trim_start_matches('-');
                assert!(script.contains(bare), "{shell:?} completion lacks {flag}");
            }
            for sub in cmd.get_subcommands() {
                assert!(script.contains(sub.get_name()), "{shell:?} completion lacks {}", sub.get_name());
            }
        }
    }

    #[test]
    fn the_man_page_has_keys_exit_status_and_examples_that_parse() {
        let page = man_page().unwrap();
        for section in [".SH KEYS", ".SH \"EXIT STATUS\"", ".SH EXAMPLES"] {
            assert!(page.contains(section), "the man page lacks {section}");
        }
        for (key, _) in crate::tui::render::KEYS {
            assert!(page.contains(&roff_text(key)), "KEYS lacks {key}");
        }
        for (status, _) in crate::exit::MEANINGS {
            assert!(page.contains(&format!("\\fB{status}\\fR")), "EXIT STATUS lacks {status}");
        }
        for (command, _) in EXAMPLES {
            let words = command.split_whitespace();
            if let Err(e) = Cli::try_parse_from(words) {
                panic!("the example `{command}` does not parse: {e}");
            }
        }
    }

    #[test]
    fn the_man_page_documents_every_flag() {
        let page = man_page().unwrap();
        assert!(page.starts_with(".ie \\n(.g .ds Aq") || page.contains(".TH gpuscope"), "{}", &page[..200]);
        for flag in long_flags(&Cli::command()) {
            // roff escapes the dashes of a flag.
            let escaped = flag.replace('-', "\\-");
            assert!(page.contains(&escaped), "the man page lacks {flag}");
        }
    }
}
