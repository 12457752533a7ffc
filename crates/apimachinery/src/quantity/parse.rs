//! Parsing quantity strings, following upstream `ParseQuantity` step by step.
//!
//! ```text
//! <quantity> ::= <sign>? <digits> [ "." <digits>? ] <suffix>
//! <suffix>   ::= "" | n | u | m | k | M | G | T | P | E | Ki | Mi | Gi | Ti | Pi | Ei | (e|E) <int>
//! ```
//!
//! Values are rounded *up* (away from zero) to nano precision (`0.1n` → `1n`); binary-suffixed
//! values are capped at 2^63-1. Like upstream, a string already in canonical form (or close
//! enough for upstream's fast-path test) is remembered verbatim and printed back unchanged —
//! that is why `12.345k` and `+1` survive a round trip while `1.5` becomes `1500m`.

use super::decimal::{MAX_DIGITS, ceil_div_pow10, mul_pow2_div_pow10_ceil, mul_pow10, pow10};
use super::{Format, Quantity, QuantityError};

/// The pieces upstream's scanner (`parseQuantityString`) finds.
struct Scanned<'a> {
    positive: bool,
    /// Sign, digits and point, without the suffix.
    value: &'a str,
    /// Integer digits without leading zeros (`"0"` if none).
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

fn is_suffix_char(b: u8) -> bool {
    b"eEinumkKMGTP".contains(&b)
}

fn scan(s: &str) -> Result<Scanned<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos = 1;
        }
        Some(b'+') => pos = 1,
        _ => {}
    }
    let mut out = Scanned {
        positive,
        value: "0",
        num: "0",
        denom: "",
        suffix: "",
    };
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(out);
    }
    let start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    out.num = if pos == start { "0" } else { &s[start..pos] };
    out.value = &s[..pos];
    if pos >= end {
        return Ok(out);
    }
    if b[pos] == b'.' {
        pos += 1;
        let dstart = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        out.denom = &s[dstart..pos];
        out.value = &s[..pos];
        if pos >= end {
            return Ok(out);
        }
    }
    let suffix_start = pos;
    while pos < end && is_suffix_char(b[pos]) {
        pos += 1;
    }
    if pos < end && matches!(b[pos], b'-' | b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::Format);
    }
    out.suffix = &s[suffix_start..];
    Ok(out)
}

/// Upstream's suffix table: `(base, exponent, format)`.
fn interpret(suffix: &str) -> Result<(u32, i64, Format), QuantityError> {
    let decimal = |e| Ok((10, e, Format::DecimalSI));
    let binary = |e| Ok((2, e, Format::BinarySI));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ => {
            let exp = suffix
                .strip_prefix(['e', 'E'])
                .filter(|rest| !rest.is_empty())
                .and_then(|rest| rest.parse::<i64>().ok())
                // Upstream truncates to int32; we refuse what would not fit.
                .filter(|e| i32::try_from(*e).is_ok())
                .ok_or(QuantityError::Suffix)?;
            Ok((10, exp, Format::DecimalExponent))
        }
    }
}

/// Upstream `ParseQuantity`.
pub(super) fn parse(s: &str) -> Result<Quantity, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::Format);
    }
    if s == "0" {
        return Ok(Quantity::zero(Format::DecimalSI).remembering(s));
    }
    let sc = scan(s)?;
    let (base, exponent, format) = interpret(sc.suffix)?;
    let digit_count = (sc.num.len() + sc.denom.len()) as i64;
    let denom_len = sc.denom.len() as i64;

    // Upstream's int64 fast path; it also decides whether the input string is kept.
    let (precision, mut scale, shift) = match format {
        Format::DecimalSI | Format::DecimalExponent => (18 - digit_count, exponent, 0),
        Format::BinarySI if sc.denom.is_empty() => (
            15 - sc.num.len() as i64 - exponent * 3 / 10 - 1,
            0,
            exponent as u32,
        ),
        Format::BinarySI => (-1, 0, 0),
    };
    if precision >= 0 {
        scale -= denom_len;
        if scale >= -9 {
            let shifted = format!("{}{}", sc.num, sc.denom);
            if let Some(result) = shifted
                .parse::<i64>()
                .ok()
                .and_then(|v| v.checked_mul(1i64 << shift).map(|r| (v, r)))
            {
                let (value, result) = result;
                let keep = match format {
                    Format::BinarySI => exponent % 10 == 0 && value & 0x07 != 0,
                    _ => scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0'),
                };
                let q = Quantity::from_parts(!sc.positive, result as u128, scale, format);
                return Ok(if keep { q.remembering(s) } else { q });
            }
        }
    }

    // The exact path: digits × 10^e10 × 2^shift, rounded up to nano precision.
    if !sc.value.bytes().any(|b| b.is_ascii_digit()) {
        return Err(QuantityError::Numeric);
    }
    let (mag, e10) = significant(sc.num, sc.denom);
    let e10 = e10 - denom_len + if base == 10 { exponent } else { 0 };
    let (mag, scale, format) = if base == 10 {
        if e10 >= -9 {
            (mag, e10, format)
        } else {
            (ceil_div_pow10(mag, (-9 - e10) as u64), -9, format)
        }
    } else {
        binary_nanos(mag, e10, exponent as u32)
    };
    Ok(Quantity::from_parts(!sc.positive, mag, scale, format))
}

/// The digits of `num.denom` as a magnitude and the scale of its last kept digit: trailing
/// zeros move into the scale, and past 38 digits the rest is rounded up.
fn significant(num: &str, denom: &str) -> (u128, i64) {
    let all: Vec<u8> = num
        .bytes()
        .chain(denom.bytes())
        .skip_while(|&b| b == b'0')
        .collect();
    let trimmed_len = all.iter().rposition(|&b| b != b'0').map_or(0, |i| i + 1);
    let mut scale = (all.len() - trimmed_len) as i64;
    let keep = trimmed_len.min(MAX_DIGITS as usize);
    let mut mag: u128 = 0;
    for &b in &all[..keep] {
        mag = mag * 10 + u128::from(b - b'0');
    }
    if keep < trimmed_len {
        scale += (trimmed_len - keep) as i64;
        if all[keep..trimmed_len].iter().any(|&b| b != b'0') {
            mag += 1;
        }
    }
    (mag, scale)
}

/// Upstream's binary slow path: the value in nano units, capped at 2^63-1, switching to
/// DecimalSI for values strictly between 0 and 1.
fn binary_nanos(mag: u128, e10: i64, shift: u32) -> (u128, i64, Format) {
    const CAP: u128 = i64::MAX as u128;
    let cap_nanos = CAP * pow10(9).unwrap_or(1);
    let nanos = if e10 + 9 >= 0 {
        mag.checked_mul(1u128 << shift)
            .and_then(|v| mul_pow10(v, (e10 + 9) as u64))
    } else {
        mul_pow2_div_pow10_ceil(mag, shift, (-(e10 + 9)) as u64)
    };
    match nanos {
        Some(n) if n <= cap_nanos => {
            let format = if n != 0 && n < pow10(9).unwrap_or(1) {
                Format::DecimalSI
            } else {
                Format::BinarySI
            };
            (n, -9, format)
        }
        _ => (CAP, 0, Format::BinarySI),
    }
}
