//! Every drawing character in one place, in a Unicode and an ASCII set:
//! ASCII for `--ascii` and for terminals whose locale is not UTF-8, where
//! block and box characters would come out as garbage.

use ratatui::symbols::border;

#[derive(Debug)]
pub struct Symbols {
    pub allocated: &'static str,
    pub cached: &'static str,
    /// Overhead, processes without a probe, what the driver keeps.
    pub other: &'static str,
    pub free: &'static str,
    /// Used memory when there are no allocator figures to split it.
    pub used: &'static str,
    pub util: &'static str,
    /// The history's SM, tensor and DRAM activity marks.
    pub sm: &'static str,
    pub tensor: &'static str,
    pub dram: &'static str,
    /// The history's power draw.
    pub power: &'static str,
    pub rule: &'static str,
    /// Marks text cut to fit a column.
    pub cut: &'static str,
    /// Ends prose that trails off.
    pub ellipsis: &'static str,
    pub degree: &'static str,
    pub ascending: &'static str,
    pub descending: &'static str,
    pub dot: &'static str,
    /// More text above / below what a view shows.
    pub up: &'static str,
    pub down: &'static str,
    /// The process tree: a branch, the last branch, a line past a branch
    /// that goes on, and nothing past a last one.
    pub tree: [&'static str; 4],
    pub border: border::Set<'static>,
}

pub const UNICODE: Symbols = Symbols {
    allocated: "█",
    cached: "▓",
    other: "▒",
    free: "░",
    used: "█",
    util: "•",
    sm: "×",
    tensor: "+",
    dram: "∘",
    power: "~",
    rule: "─",
    cut: "…",
    ellipsis: "…",
    degree: "°C",
    ascending: "▲",
    descending: "▼",
    dot: "·",
    up: "↑",
    down: "↓",
    tree: ["├─ ", "└─ ", "│  ", "   "],
    border: border::PLAIN,
};

pub const ASCII: Symbols = Symbols {
    allocated: "#",
    cached: "=",
    other: "+",
    free: ".",
    used: "#",
    util: "*",
    sm: "x",
    tensor: "+",
    dram: "o",
    power: "~",
    rule: "-",
    cut: "~",
    ellipsis: "...",
    degree: "C",
    ascending: "^",
    descending: "v",
    dot: "|",
    up: "^",
    down: "v",
    tree: ["|- ", "`- ", "|  ", "   "],
    border: border::Set {
        top_left: "+",
        top_right: "+",
        bottom_left: "+",
        bottom_right: "+",
        vertical_left: "|",
        vertical_right: "|",
        horizontal_top: "-",
        horizontal_bottom: "-",
    },
};

pub fn pick(ascii: bool) -> &'static Symbols {
    if ascii { &ASCII } else { &UNICODE }
}
