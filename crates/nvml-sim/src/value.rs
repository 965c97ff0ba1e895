//! A reading in a scenario: a constant, or a periodic wave so that the demo
//! looks alive while tests that use constants stay deterministic.

use std::f64::consts::TAU;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, de::value::MapAccessDeserializer};

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Const(f64),
    Wave(Wave),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Wave {
    min: f64,
    max: f64,
    #[serde(default = "default_period_s")]
    period_s: f64,
    #[serde(default)]
    shape: Shape,
    /// Fraction of a period (0.0..1.0) by which the wave is advanced, so that
    /// GPUs running the same job need not move in lockstep.
    #[serde(default)]
    phase: f64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Shape {
    /// Starts at the midpoint and rises first.
    #[default]
    Sine,
    /// Starts at `min`, peaks at half period.
    Triangle,
    /// `min` for the first half period, `max` for the second.
    Square,
    /// Sawtooth from `min` to `max`, then drops back.
    Ramp,
}

fn default_period_s() -> f64 {
    60.0
}

impl Value {
    /// The reading `t` seconds after the library was initialised.
    pub(crate) fn at(&self, t: f64) -> f64 {
        match self {
            Value::Const(v) => *v,
            Value::Wave(w) => w.at(t),
        }
    }
}

impl Value {
    /// The reading summed over the first `t` seconds: what a cumulative
    /// counter growing at this rate holds at `t`.
    pub(crate) fn integral(&self, t: f64) -> f64 {
        match self {
            Value::Const(v) => v * t,
            Value::Wave(w) => w.integral(t),
        }
    }
}

impl Wave {
    fn integral(&self, t: f64) -> f64 {
        let start = self.phase;
        let end = t / self.period_s + self.phase;
        let units = self.unit_integral(end) - self.unit_integral(start);
        self.min * t + (self.max - self.min) * self.period_s * units
    }

    /// The integral of the unit shape from 0 to `x` periods: half of each
    /// whole period (every shape averages one half) plus the part period.
    fn unit_integral(&self, x: f64) -> f64 {
        let p = x.rem_euclid(1.0);
        let part = match self.shape {
            Shape::Sine => 0.5 * p + (1.0 - (TAU * p).cos()) / (2.0 * TAU),
            Shape::Triangle if p < 0.5 => p * p,
            Shape::Triangle => 2.0 * p - p * p - 0.5,
            Shape::Square => (p - 0.5).max(0.0),
            Shape::Ramp => p * p / 2.0,
        };
        0.5 * (x - p) + part
    }

    fn at(&self, t: f64) -> f64 {
        let p = (t / self.period_s + self.phase).rem_euclid(1.0);
        let unit = match self.shape {
            Shape::Sine => 0.5 + 0.5 * (TAU * p).sin(),
            Shape::Triangle if p < 0.5 => 2.0 * p,
            Shape::Triangle => 2.0 - 2.0 * p,
            Shape::Square if p < 0.5 => 0.0,
            Shape::Square => 1.0,
            Shape::Ramp => p,
        };
        self.min + (self.max - self.min) * unit
    }

    fn check(&self) -> Result<(), String> {
        if !(self.min.is_finite() && self.max.is_finite() && self.phase.is_finite()) {
            return Err("min, max and phase must be finite numbers".into());
        }
        if !(self.period_s.is_finite() && self.period_s > 0.0) {
            return Err(format!("period_s must be positive, got {}", self.period_s));
        }
        Ok(())
    }
}

/// Percentages are clamped because a wave overshooting 100 must not be
/// reported as an impossible reading.
pub(crate) fn percent(x: f64) -> u32 {
    x.round().clamp(0.0, 100.0) as u32
}

/// Rounds to a `c_uint`; the float-to-int cast saturates and maps NaN to 0.
pub(crate) fn uint(x: f64) -> u32 {
    x.round() as u32
}

/// MiB (possibly fractional) to bytes, as NVML reports memory.
pub(crate) fn mib_to_bytes(mib: f64) -> u64 {
    (mib * 1_048_576.0).round() as u64
}

// Hand-written rather than `#[serde(untagged)]` so that a typo inside a wave
// table reports the offending key instead of "did not match any variant".
impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number or a table { min, max, period_s, shape, phase }")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Const(v as f64))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Const(v as f64))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        if v.is_finite() { Ok(Value::Const(v)) } else { Err(E::custom("a reading must be a finite number")) }
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        let wave = Wave::deserialize(MapAccessDeserializer::new(map))?;
        wave.check().map_err(de::Error::custom)?;
        Ok(Value::Wave(wave))
    }
}

#[cfg(test)]
mod tests;
