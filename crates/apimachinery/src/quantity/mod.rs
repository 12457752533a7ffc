//! Kubernetes resource quantities (`100m`, `1.5`, `2Gi`, `1e3`): parsing, upstream's exact
//! string form, comparison and arithmetic.
//!
//! Mirrors upstream `k8s.io/apimachinery/pkg/api/resource.Quantity`. A quantity is a signed
//! fixed-point decimal, never a float: a magnitude, a base-10 scale and the [`Format`] it was
//! written in (decimal SI, binary SI or exponent), which decides how it prints. Parsing rounds
//! up to nano precision; printing picks the largest suffix that loses nothing (`1024Mi` →
//! `1Gi`, `0.1` → `100m`, `1e3` stays `1e3`). Pod resources, quota, node capacity and
//! allocatable are quantities; the scheduler and quota controllers compare and add them.
//!
//! Deliberate differences from upstream, all on inputs no real client sends: more than 38
//! significant digits are rounded up; exponents outside i32 are refused; DecimalSI values
//! above `E` print as `1000E` (or `1e60` for absurd exponents) and binary ones above `Ei` as
//! `1024Ei` (upstream prints them without a suffix, changing their value).

mod decimal;
mod format;
mod parse;

use std::cmp::Ordering;
use std::fmt;

use serde_json::Value;

use decimal::{add_signed, ceil_div_pow10, cmp_mag, mul_pow10, strip_zeros};

/// Why a string is not a quantity. `Display` is upstream's exact message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string is not of the quantity shape at all (empty, spaces, stray characters).
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    /// The number has no digits where upstream needs some (`+Ei`).
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// The suffix is not one of the known ones (`1i`, `0.1mi`, `1e-`).
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// How a quantity prints (upstream `resource.Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `12e6`
    DecimalExponent,
    /// `12Mi` (powers of 1024)
    BinarySI,
    /// `12M` (powers of 1000), and plain numbers
    DecimalSI,
}

impl Format {
    /// Upstream's name of the format.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::DecimalExponent => "DecimalExponent",
            Format::BinarySI => "BinarySI",
            Format::DecimalSI => "DecimalSI",
        }
    }
}

/// A resource quantity. Equality and ordering compare values only (`1Gi == 1073741824`).
#[derive(Debug, Clone)]
pub struct Quantity {
    negative: bool,
    /// Magnitude without trailing zeros (0 for zero).
    mag: u128,
    /// Base-10 exponent of `mag`; at least -9 (nano).
    scale: i64,
    format: Format,
    /// The input string, when upstream would print it back verbatim.
    original: Option<Box<str>>,
}

impl Quantity {
    /// Parses any quantity form (upstream `ParseQuantity`); no surrounding whitespace allowed.
    pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
        parse::parse(s)
    }

    /// Reads a quantity from JSON as upstream's `UnmarshalJSON` does: a string (surrounding
    /// whitespace trimmed) or a bare number.
    pub fn from_json(v: &Value) -> Result<Quantity, QuantityError> {
        match v {
            Value::String(s) => Quantity::parse(s.trim()),
            Value::Number(n) => Quantity::parse(&n.to_string()),
            _ => Err(QuantityError::Format),
        }
    }

    /// Zero in the given format.
    pub fn zero(format: Format) -> Quantity {
        Quantity::from_parts(false, 0, 0, format)
    }

    /// `value` units (upstream `NewQuantity`).
    pub fn new(value: i64, format: Format) -> Quantity {
        Quantity::from_scaled(i128::from(value), 0, format)
    }

    /// `value` thousandths (upstream `NewMilliQuantity`).
    pub fn from_milli(value: i64, format: Format) -> Quantity {
        Quantity::from_scaled(i128::from(value), -3, format)
    }

    /// `value × 10^scale`, rounded up to nano precision (upstream `NewScaledQuantity`, which
    /// is always DecimalSI; here the format is yours to choose).
    pub fn from_scaled(value: i128, scale: i32, format: Format) -> Quantity {
        let (mag, scale) = if scale < -9 {
            (
                ceil_div_pow10(value.unsigned_abs(), (-9 - i64::from(scale)) as u64),
                -9,
            )
        } else {
            (value.unsigned_abs(), i64::from(scale))
        };
        Quantity::from_parts(value < 0, mag, scale, format)
    }

    fn from_parts(negative: bool, mag: u128, scale: i64, format: Format) -> Quantity {
        let (mag, scale) = strip_zeros(mag, scale);
        Quantity {
            negative: negative && mag != 0,
            mag,
            scale,
            format,
            original: None,
        }
    }

    fn remembering(mut self, s: &str) -> Quantity {
        self.original = Some(s.into());
        self
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// The same value printed in another format.
    pub fn with_format(mut self, format: Format) -> Quantity {
        self.format = format;
        self.original = None;
        self
    }

    pub fn is_zero(&self) -> bool {
        self.mag == 0
    }

    /// -1, 0 or 1.
    pub fn sign(&self) -> i32 {
        match (self.mag == 0, self.negative) {
            (true, _) => 0,
            (false, true) => -1,
            (false, false) => 1,
        }
    }

    /// The value in units of `10^scale`, rounded away from zero, saturating at the i128 range
    /// (upstream `ScaledValue`, without its overflow).
    pub fn scaled_value_i128(&self, scale: i32) -> i128 {
        let d = self.scale - i64::from(scale);
        let mag = if d >= 0 {
            mul_pow10(self.mag, d as u64).unwrap_or(u128::MAX)
        } else {
            ceil_div_pow10(self.mag, (-d) as u64)
        };
        let mag = i128::try_from(mag).unwrap_or(i128::MAX);
        if self.negative { -mag } else { mag }
    }

    /// Whole units, rounded away from zero, saturating at the i64 range (upstream `Value`).
    pub fn value(&self) -> i64 {
        saturate(self.scaled_value_i128(0))
    }

    /// Thousandths, rounded away from zero, saturating at the i64 range (upstream
    /// `MilliValue`): CPU in millicores.
    pub fn milli_value(&self) -> i64 {
        saturate(self.scaled_value_i128(-3))
    }

    /// Thousandths as i128 (no saturation short of 1.7e38).
    pub fn milli_value_i128(&self) -> i128 {
        self.scaled_value_i128(-3)
    }

    /// An approximate float (for display and ratios, never for storage).
    pub fn as_f64(&self) -> f64 {
        let v = self.mag as f64 * 10f64.powi(self.scale.clamp(-400, 400) as i32);
        if self.negative { -v } else { v }
    }

    /// Rounds up (away from zero) to a multiple of `10^scale`; the flag says whether the value
    /// was already exact (upstream `RoundUp`).
    pub fn round_up(&self, scale: i32) -> (Quantity, bool) {
        let scale = i64::from(scale);
        if self.scale >= scale {
            return (self.clone(), true);
        }
        let mag = ceil_div_pow10(self.mag, (scale - self.scale) as u64);
        let q = Quantity::from_parts(self.negative, mag, scale, self.format);
        let exact = q == *self;
        (q, exact)
    }

    /// `self + other`. A zero left side takes the right side's format (upstream `Add`).
    pub fn add(&self, other: &Quantity) -> Quantity {
        let format = if self.is_zero() {
            other.format
        } else {
            self.format
        };
        let (neg, mag, scale) = add_signed(
            (self.negative, self.mag, self.scale),
            (other.negative, other.mag, other.scale),
        );
        Quantity::from_parts(neg, mag, scale, format)
    }

    /// `self - other`. A zero left side takes the right side's format (upstream `Sub`).
    pub fn sub(&self, other: &Quantity) -> Quantity {
        self.add(&other.neg())
    }

    /// `-self`, same format.
    pub fn neg(&self) -> Quantity {
        Quantity::from_parts(!self.negative, self.mag, self.scale, self.format)
    }

    /// `self × n` (upstream `Mul`); past 38 digits the magnitude is rounded up.
    pub fn mul(&self, n: i64) -> Quantity {
        let (mut mag, mut scale) = (self.mag, self.scale);
        let factor = u128::from(n.unsigned_abs());
        let product = loop {
            match mag.checked_mul(factor) {
                Some(p) => break p,
                None => {
                    mag = ceil_div_pow10(mag, 1);
                    scale += 1;
                }
            }
        };
        Quantity::from_parts(self.negative != (n < 0), product, scale, self.format)
    }

    /// Upstream's canonical string, ignoring any remembered input spelling.
    pub fn canonical(&self) -> String {
        format::canonical(self.negative, self.mag, self.scale, self.format)
    }
}

fn saturate(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Quantity) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Quantity) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Quantity) -> Ordering {
        let (a, b) = (self.sign(), other.sign());
        if a != b {
            return a.cmp(&b);
        }
        let m = cmp_mag(self.mag, self.scale, other.mag, other.scale);
        if self.negative { m.reverse() } else { m }
    }
}

/// Upstream `String()`: the remembered input when upstream keeps it, else the canonical form.
impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.original {
            Some(s) => f.write_str(s),
            None => f.write_str(&self.canonical()),
        }
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Quantity, QuantityError> {
        Quantity::parse(s)
    }
}

impl Default for Quantity {
    /// Zero, DecimalSI.
    fn default() -> Quantity {
        Quantity::zero(Format::DecimalSI)
    }
}

impl std::ops::Add for &Quantity {
    type Output = Quantity;
    fn add(self, rhs: &Quantity) -> Quantity {
        Quantity::add(self, rhs)
    }
}

impl std::ops::Sub for &Quantity {
    type Output = Quantity;
    fn sub(self, rhs: &Quantity) -> Quantity {
        Quantity::sub(self, rhs)
    }
}

impl std::ops::AddAssign<&Quantity> for Quantity {
    fn add_assign(&mut self, rhs: &Quantity) {
        *self = Quantity::add(self, rhs);
    }
}

impl std::ops::SubAssign<&Quantity> for Quantity {
    fn sub_assign(&mut self, rhs: &Quantity) {
        *self = Quantity::sub(self, rhs);
    }
}

impl serde::Serialize for Quantity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Quantity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Quantity, D::Error> {
        let v = Value::deserialize(d)?;
        Quantity::from_json(&v).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;
