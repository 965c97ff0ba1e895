//! Styles. Only the 16 named ANSI colours, so any terminal and any
//! palette shows them; and nothing relies on colour alone: every state
//! that has a colour also has a word or a mark, and without colour
//! (`--no-color`, `NO_COLOR`) the same screen keeps bold and reverse.

use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone, Copy)]
pub struct Theme {
    pub title: Style,
    pub rule: Style,
    pub label: Style,
    pub dim: Style,
    pub header_row: Style,
    pub selected: Style,
    pub key: Style,
    pub info: Style,
    pub warn: Style,
    pub crit: Style,
    pub allocated: Style,
    pub cached: Style,
    pub other: Style,
    pub free: Style,
    pub used: Style,
    pub util: Style,
    pub sm: Style,
    pub tensor: Style,
    pub dram: Style,
    pub power: Style,
}

impl Theme {
    pub fn new(color: bool) -> Self {
        let bold = Style::new().add_modifier(Modifier::BOLD);
        let plain = Style::new();
        let c = |style: Style, fg: Color| if color { style.fg(fg) } else { style };
        Self {
            title: c(bold, Color::Cyan),
            rule: c(plain, Color::DarkGray),
            label: c(plain, Color::Gray),
            dim: c(plain, Color::DarkGray),
            header_row: c(bold, Color::Cyan),
            selected: Style::new().add_modifier(Modifier::REVERSED),
            key: c(bold, Color::Yellow),
            info: c(plain, Color::Cyan),
            warn: c(bold, Color::Yellow),
            crit: c(bold, Color::Red),
            allocated: c(plain, Color::Green),
            cached: c(plain, Color::Cyan),
            other: c(plain, Color::Yellow),
            free: c(plain, Color::DarkGray),
            used: c(plain, Color::Green),
            util: c(bold, Color::Magenta),
            sm: c(bold, Color::LightBlue),
            tensor: c(bold, Color::LightRed),
            dram: c(plain, Color::White),
            power: c(plain, Color::LightYellow),
        }
    }
}
