//! Upstream's canonical quantity string (`CanonicalizeBytes`).
//!
//! - Decimal formats: the exponent is lowered to a multiple of 3 and printed as an SI suffix
//!   (`n u m "" k M G T P E`) or as `e<exp>`; no fractional digits, nothing lost.
//! - BinarySI: values strictly between -1024 and 1024, and values that are not whole, print as
//!   DecimalSI; others take the largest power-of-1024 suffix that divides them.

use super::Format;
use super::decimal::mul_pow10;

const DECIMAL_SUFFIXES: [(i64, &str); 10] = [
    (-9, "n"),
    (-6, "u"),
    (-3, "m"),
    (0, ""),
    (3, "k"),
    (6, "M"),
    (9, "G"),
    (12, "T"),
    (15, "P"),
    (18, "E"),
];

const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// `mag × 10^scale` (mag without trailing zeros) with its sign, in `format`.
pub(super) fn canonical(negative: bool, mag: u128, scale: i64, format: Format) -> String {
    if mag == 0 {
        return "0".to_string();
    }
    let sign = if negative { "-" } else { "" };
    if format == Format::BinarySI
        && let Some(s) = binary(mag, scale)
    {
        return format!("{sign}{s}");
    }
    let format = if format == Format::BinarySI {
        Format::DecimalSI
    } else {
        format
    };
    format!("{sign}{}", decimal(mag, scale, format))
}

/// The BinarySI form, or `None` when upstream falls back to DecimalSI.
fn binary(mag: u128, scale: i64) -> Option<String> {
    // A whole number needs scale >= 0 (the magnitude has no trailing zeros).
    if scale < 0 {
        return None;
    }
    let mut value = mul_pow10(mag, scale as u64)?;
    if value < 1024 {
        return None;
    }
    let mut k = 0;
    while k + 1 < BINARY_SUFFIXES.len() && value.is_multiple_of(1024) {
        value /= 1024;
        k += 1;
    }
    Some(format!("{value}{}", BINARY_SUFFIXES[k]))
}

fn decimal(mag: u128, scale: i64, format: Format) -> String {
    let mut digits = mag.to_string();
    let mut exp = scale;
    let pad = exp.rem_euclid(3);
    exp -= pad;
    push_zeros(&mut digits, pad);
    match format {
        Format::DecimalExponent => {
            if exp != 0 {
                digits.push('e');
                digits.push_str(&exp.to_string());
            }
        }
        _ => {
            // Past `E` upstream has no suffix (and prints a wrong value); we pad onto `E`, or
            // for absurd exponents fall back to the exponent form rather than print megabytes.
            if exp > 18 + 30 {
                digits.push('e');
                digits.push_str(&exp.to_string());
                return digits;
            }
            if exp > 18 {
                push_zeros(&mut digits, exp - 18);
                exp = 18;
            }
            let suffix = DECIMAL_SUFFIXES
                .iter()
                .find(|(e, _)| *e == exp)
                .map_or("", |(_, s)| s);
            digits.push_str(suffix);
        }
    }
    digits
}

fn push_zeros(s: &mut String, n: i64) {
    for _ in 0..n {
        s.push('0');
    }
}
