//! Human units for people; JSON keeps raw bytes.

/// Binary units, one decimal from GiB up: "512 MiB", "63.2 GiB".
pub fn bytes(b: u64) -> String {
    let mut out = String::with_capacity(12);
    push_bytes(&mut out, b);
    out
}

/// `bytes` onto the end of `out`.
pub fn push_bytes(out: &mut String, b: u64) {
    let (scaled, unit) = binary(b);
    scaled.push_to(out);
    out.push_str([" B", " KiB", " MiB", " GiB", " TiB"][unit]);
}

/// `b` in the largest binary unit it reaches (0 bytes, 1 KiB, 2 MiB,
/// 3 GiB, 4 TiB), with one decimal from GiB up: the figure, and the unit's
/// number, which each form names its own way.
pub fn binary(b: u64) -> (Scaled, usize) {
    match b {
        0..KIB => (Scaled { digits: b, tenths: false }, 0),
        KIB..MIB => (Scaled::of(b, 10, false), 1),
        MIB..GIB => (Scaled::of(b, 20, false), 2),
        GIB..TIB => (Scaled::of(b, 30, true), 3),
        _ => (Scaled::of(b, 40, true), 4),
    }
}

/// `v` with no decimal or one, exactly as `format!("{v:.0}")` (or
/// `{v:.1}`) writes it, from integers where `v` allows (a power draw, a
/// CPU percentage: from zero to 2^53), through `core::fmt` otherwise.
/// An `f64` is an integer times a power of two; below 2^53 that power is
/// at most 2^0, so the value is `Scaled`'s integer shifted right, rounded
/// as it rounds.
pub fn push_fixed(out: &mut String, v: f64, tenths: bool) {
    use std::fmt::Write as _;
    // Negative values (and -0.0, written "-0"), NaN, infinities and the
    // very large: what the views never draw, left to `core::fmt`.
    if v.is_sign_negative() || !v.is_finite() || v >= 9_007_199_254_740_992.0 {
        let _ = if tenths { write!(out, "{v:.1}") } else { write!(out, "{v:.0}") };
        return;
    }
    let bits = v.to_bits();
    let (exponent, fraction) = ((bits >> 52) & 0x7FF, bits & ((1 << 52) - 1));
    // v = mantissa / 2^shift, with shift >= 0 below 2^53.
    let (mantissa, shift) =
        if exponent == 0 { (fraction, 1074) } else { (fraction | 1 << 52, 1075u64.saturating_sub(exponent)) };
    let scaled = if shift == 0 {
        Scaled { digits: if tenths { mantissa * 10 } else { mantissa }, tenths }
    } else {
        // Beyond a shift of 64 the value is below 2^-11 and rounds to zero
        // both ways: `of`'s clamp at 64 keeps the rest below its half.
        Scaled::of(mantissa, u32::try_from(shift).unwrap_or(64), tenths)
    };
    scaled.push_to(out);
}

/// Pairs of figures share the unit of the larger: "63.2/79.6 GiB".
pub fn bytes_pair(a: Option<u64>, b: Option<u64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b >= GIB => {
            let mut out = Scaled::of(a, 30, true).with("/");
            Scaled::of(b, 30, true).push_to(&mut out);
            out.push_str(" GiB");
            out
        }
        (a, b) => format!("{}/{}", opt(a, bytes), opt(b, bytes)),
    }
}

pub fn opt<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map_or_else(|| "n/a".to_string(), f)
}

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;
pub const TIB: u64 = 1 << 40;

/// `b / 2^shift` with no decimal or one, written exactly as
/// `format!("{:.0}", b as f64 / 2^shift)` (or `{:.1}`) writes it, from
/// integers: float formatting's exact mode, and `format!` around it, cost
/// about a thousand instructions a figure, and a frame of the process table
/// writes hundreds. The rules it keeps: `b` is first rounded to an `f64`, as
/// `as` does above 2^53; dividing by a power of two is then exact; and the
/// last digit is rounded half to even, as `core::fmt` rounds the exact
/// value (tests compare the two over ties, edges and random values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scaled {
    /// The value in units of its last digit (2^64 x 10 >> shift: within a
    /// u64 from a shift of 4 up, and every caller shifts by 10 or more).
    digits: u64,
    tenths: bool,
}

impl Scaled {
    /// `shift` from 1 to 64.
    pub fn of(b: u64, shift: u32, tenths: bool) -> Self {
        // The integer the f64 holds: exact, at most 2^64.
        let exact = b as f64 as u128;
        let scaled = if tenths { exact * 10 } else { exact };
        let shift = shift.clamp(1, 64);
        let (whole, rest) = (scaled >> shift, scaled & ((1 << shift) - 1));
        let half = 1 << (shift - 1);
        let up = rest > half || (rest == half && whole % 2 == 1);
        Self { digits: u64::try_from(whole + u128::from(up)).unwrap_or(u64::MAX), tenths }
    }

    /// The text, followed by `unit`, in a string of its own.
    pub fn with(self, unit: &str) -> String {
        let mut out = String::with_capacity(24 + unit.len());
        self.push_to(&mut out);
        out.push_str(unit);
        out
    }

    pub fn push_to(self, out: &mut String) {
        let mut digits = itoa::Buffer::new();
        if self.tenths {
            out.push_str(digits.format(self.digits / 10));
            out.push('.');
            out.push_str(digits.format(self.digits % 10));
        } else {
            out.push_str(digits.format(self.digits));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_decimals_read_as_float_formatting_writes_them() {
        let ties = (0..400u32).map(|n| f64::from(n) / 20.0);
        let edges = [
            0.0,
            f64::MIN_POSITIVE,
            5e-324,
            0.05,
            0.04999999999999999,
            0.45,
            0.5,
            1.5,
            2.5,
            2.25,
            99.95,
            1e15,
            4_503_599_627_370_495.5,
            4_503_599_627_370_496.0,
            9_007_199_254_740_991.0,
            9_007_199_254_740_992.0,
            1e300,
            -0.0,
            -0.4,
            -2.5,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        for v in ties.chain(edges) {
            for tenths in [false, true] {
                let mut ours = String::new();
                push_fixed(&mut ours, v, tenths);
                let theirs = if tenths { format!("{v:.1}") } else { format!("{v:.0}") };
                assert_eq!(ours, theirs, "{v:e}, tenths {tenths}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn fixed_decimals_match_float_formatting_at_random(
            bits in proptest::num::u64::ANY,
            small in 0.0..1e4f64,
            large in 0.0..9.1e15f64,
            tenths in proptest::bool::ANY,
        ) {
            for v in [f64::from_bits(bits), small, large] {
                let mut ours = String::new();
                push_fixed(&mut ours, v, tenths);
                let theirs = if tenths { format!("{v:.1}") } else { format!("{v:.0}") };
                proptest::prop_assert_eq!(ours, theirs);
            }
        }
    }

    #[test]
    fn binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(2048), "2 KiB");
        assert_eq!(bytes(512 << 20), "512 MiB");
        assert_eq!(bytes(80 << 30), "80.0 GiB");
        assert_eq!(bytes(3 << 40), "3.0 TiB");
        assert_eq!(bytes_pair(Some(1 << 30), Some(80 << 30)), "1.0/80.0 GiB");
        assert_eq!(bytes_pair(None, Some(512 << 20)), "n/a/512 MiB");
    }

    /// What `bytes` wrote before it formatted with integers: the reference.
    fn by_float(b: u64) -> String {
        let (f, k) = (b as f64, 1024.0_f64);
        match f {
            f if f < k => format!("{f:.0} B"),
            f if f < k * k => format!("{:.0} KiB", f / k),
            f if f < k.powi(3) => format!("{:.0} MiB", f / (k * k)),
            f if f < k.powi(4) => format!("{:.1} GiB", f / k.powi(3)),
            f => format!("{:.1} TiB", f / k.powi(4)),
        }
    }

    fn by_float_scaled(b: u64, shift: i32, tenths: bool) -> String {
        let x = b as f64 / 2f64.powi(shift);
        if tenths { format!("{x:.1}") } else { format!("{x:.0}") }
    }

    /// Values at and around every kind of edge: exact ties of the last
    /// digit (odd and even), a unit's boundary, and above 2^53 where `as
    /// f64` rounds.
    fn edges() -> Vec<u64> {
        let mut out = vec![0, 1, 1023, u64::MAX, u64::MAX - 1, 1 << 53, (1 << 53) + 1, (1 << 63) + 1];
        for shift in [10u32, 20, 30, 40] {
            for k in 0..40u64 {
                // k halves of a tenth, and of a whole unit.
                let tie_tenth = (k << shift) / 20;
                let tie_whole = (k << shift) / 2;
                for base in [tie_tenth, tie_whole, (1u64 << shift).saturating_mul(k), (1 << shift) - 1] {
                    out.extend([base.saturating_sub(1), base, base.saturating_add(1)]);
                }
            }
        }
        out
    }

    #[test]
    fn integers_write_what_float_formatting_wrote() {
        for b in edges() {
            assert_eq!(bytes(b), by_float(b), "{b}");
            for (shift, tenths) in [(10, false), (20, false), (30, true), (40, true), (30, false), (10, true)] {
                let ours = Scaled::of(b, shift as u32, tenths).with("");
                assert_eq!(ours, by_float_scaled(b, shift, tenths), "{b} >> {shift}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn any_size_is_written_as_float_formatting_wrote_it(b in proptest::prelude::any::<u64>(), small in 0u64..(1 << 45)) {
            for b in [b, small, b >> 20] {
                proptest::prop_assert_eq!(bytes(b), by_float(b));
                proptest::prop_assert_eq!(bytes_pair(Some(small), Some(b)), {
                    let g = 1024f64.powi(3);
                    if b >= GIB { format!("{:.1}/{:.1} GiB", small as f64 / g, b as f64 / g) } else { format!("{}/{}", by_float(small), by_float(b)) }
                });
            }
        }
    }
}
