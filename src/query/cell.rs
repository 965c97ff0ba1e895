//! One value of nvidia-smi's CSV, and how it is written.

/// What a field holds for one row.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// A number, written with the field's unit after a space unless
    /// `nounits` (`1024 MiB`, `45 %`).
    Num(String),
    /// Text, written as it is (`P0`, `Enabled`, a name).
    Text(String),
    /// nvidia-smi's `[N/A]`: not available or not supported here.
    NotAvailable,
    /// The GPU fell off the bus: no reading of it can be trusted.
    Lost,
}

impl Cell {
    pub fn int(v: impl Into<u64>) -> Self {
        Self::Num(v.into().to_string())
    }

    /// nvidia-smi writes watts with two decimals (`106.56 W`).
    pub fn watts(w: f64) -> Self {
        Self::Num(format!("{w:.2}"))
    }

    /// Memory in whole MiB, rounded down as nvidia-smi does (a total of
    /// 16384 MiB shows as 103 + 0 + 16280 with 1 MiB in fractions).
    pub fn mib(bytes: u64) -> Self {
        Self::Num((bytes / (1024 * 1024)).to_string())
    }

    pub fn opt<T>(v: Option<T>, f: impl FnOnce(T) -> Cell) -> Self {
        v.map_or(Self::NotAvailable, f)
    }

    pub fn text(s: Option<&str>) -> Self {
        s.map_or(Self::NotAvailable, |s| Self::Text(s.to_string()))
    }

    pub fn flag(on: Option<bool>, yes: &str, no: &str) -> Self {
        Self::opt(on, |on| Self::Text(if on { yes } else { no }.to_string()))
    }

    pub fn write(&self, unit: Option<&str>, units: bool, out: &mut String) {
        match (self, unit) {
            (Self::Num(n), Some(u)) if units => {
                out.push_str(n);
                out.push(' ');
                out.push_str(u);
            }
            (Self::Num(s) | Self::Text(s), _) => out.push_str(s),
            (Self::NotAvailable, _) => out.push_str("[N/A]"),
            (Self::Lost, _) => out.push_str("[GPU is lost]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(c: &Cell, unit: Option<&str>, units: bool) -> String {
        let mut s = String::new();
        c.write(unit, units, &mut s);
        s
    }

    #[test]
    fn units_follow_a_space_unless_nounits() {
        assert_eq!(written(&Cell::mib(1024 * 1024 * 1024 + 5), Some("MiB"), true), "1024 MiB");
        assert_eq!(written(&Cell::watts(106.555_1), Some("W"), true), "106.56 W");
        assert_eq!(written(&Cell::watts(400.0), Some("W"), false), "400.00");
        assert_eq!(written(&Cell::int(45u32), Some("%"), true), "45 %");
        assert_eq!(written(&Cell::NotAvailable, Some("%"), true), "[N/A]");
        assert_eq!(written(&Cell::Text("P0".into()), None, true), "P0");
    }
}
