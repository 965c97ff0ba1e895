//! `e`: the selected process's GPU-related environment, one variable a
//! line, or why it cannot be read.

use crate::tui::term::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::tui::render::Ctx;
use crate::tui::render::text::{fit, spread};
use crate::tui::term::Lines;

pub fn draw(frame: &mut Frame, area: Rect, ctx: &Ctx, pid: u32, vars: Option<&Result<Vec<(String, String)>, String>>) {
    let (sym, t) = (ctx.sym, &ctx.theme);
    let w = area.width as usize;
    let left = vec![
        Span::styled(sym.rule, t.rule),
        Span::styled(
            format!(" Environment of PID {pid} ({}) ", if ctx.simulated() { "simulated" } else { "as it started" }),
            t.title,
        ),
    ];
    let mut lines = vec![spread(
        left,
        vec![Span::styled(" Esc: back ", t.dim), Span::styled(sym.rule, t.rule)],
        w,
        sym.rule,
        t.rule,
    )];
    match vars {
        None => lines.push(Line::styled(format!("reading /proc/{pid}/environ{}", sym.ellipsis), t.dim)),
        Some(Err(why)) => lines.push(Line::styled(fit(&ctx.clean(why), w, sym.cut), t.warn)),
        Some(Ok(vars)) if vars.is_empty() => {
            lines.push(Line::styled("none of the variables that decide GPU use is set", t.dim));
        }
        Some(Ok(vars)) => {
            let key_w = vars.iter().map(|(k, _)| k.len()).max().unwrap_or(0).min(w / 2);
            for (k, v) in vars {
                let key = fit(&ctx.clean(k), key_w, sym.cut);
                let value = fit(&ctx.clean(v), w.saturating_sub(key_w + 3), sym.cut);
                lines.push(Line::from(vec![Span::styled(format!("{key:<key_w$} = "), t.label), Span::raw(value)]));
            }
        }
    }
    frame.render_lines(Lines(lines), area);
}
