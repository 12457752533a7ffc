//! The number forms node-group sizing accepts, and their values, exactly as the Cozystack
//! chart reads them: memory quantities (`128Mi`, `1Gi`, `1e9`), CPU quantities (`100m`,
//! `0.5`, `2`) and percentages (`7%`).
//!
//! The chart does its arithmetic in float64 (`mulf`, `divf`, truncating `int`), so these do
//! too: the same inputs give the same reservations and allocatable amounts, to the MiB.
//! The shapes are narrower than Kubernetes quantities on purpose (no signs, no `u`/`n`).

/// Binary suffixes and their multipliers.
const BINARY: [(&str, f64); 6] = [
    ("Ki", 1024.0),
    ("Mi", 1048576.0),
    ("Gi", 1073741824.0),
    ("Ti", 1099511627776.0),
    ("Pi", 1125899906842624.0),
    ("Ei", 1152921504606846976.0),
];

/// Decimal suffixes a memory quantity may carry, and their multipliers.
const DECIMAL: [(&str, f64); 6] = [
    ("k", 1e3),
    ("M", 1e6),
    ("G", 1e9),
    ("T", 1e12),
    ("P", 1e15),
    ("E", 1e18),
];

/// Splits `digits[.digits]` off the front of `s`; `None` if it does not start with a digit.
fn split_decimal(s: &str) -> Option<(&str, &str)> {
    let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
    if int_len == 0 {
        return None;
    }
    let rest = &s[int_len..];
    if let Some(frac) = rest.strip_prefix('.') {
        let frac_len = frac.bytes().take_while(u8::is_ascii_digit).count();
        if frac_len == 0 {
            return None;
        }
        let end = int_len + 1 + frac_len;
        return Some((&s[..end], &s[end..]));
    }
    Some((&s[..int_len], rest))
}

/// Splits an optional exponent (`e3`, `E-6`) off the front of `s`.
fn split_exponent(s: &str) -> (&str, &str) {
    let bytes = s.as_bytes();
    if !matches!(bytes.first(), Some(b'e' | b'E')) {
        return ("", s);
    }
    let mut i = 1;
    if matches!(bytes.get(1), Some(b'+' | b'-')) {
        i = 2;
    }
    let digits = s[i..].bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        // A lone `E` is the exa suffix, not an exponent.
        return ("", s);
    }
    (&s[..i + digits], &s[i + digits..])
}

/// Whether `s` is a memory quantity: digits, an optional fraction, an optional exponent and
/// an optional suffix (`Ki`..`Ei`, `k`..`E`).
pub fn is_memory(s: &str) -> bool {
    let Some((_, rest)) = split_decimal(s) else {
        return false;
    };
    let (_, suffix) = split_exponent(rest);
    suffix.is_empty()
        || BINARY.iter().any(|(k, _)| *k == suffix)
        || DECIMAL.iter().any(|(k, _)| *k == suffix)
}

/// Whether `s` is a CPU quantity: integer millicores (`100m`) or decimal cores (`0.5`, `2`).
pub fn is_cpu(s: &str) -> bool {
    if let Some(m) = s.strip_suffix('m') {
        return !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit());
    }
    matches!(split_decimal(s), Some((_, "")))
}

/// Whether `s` is a plain non-negative decimal (`7`, `7.5`): the number of a percentage.
pub fn is_plain_number(s: &str) -> bool {
    matches!(split_decimal(s), Some((_, "")))
}

/// The value of a memory quantity in bytes (the chart's `toFloat`: the suffix's multiplier
/// times the number). `None` unless [`is_memory`] holds.
pub fn memory_bytes(s: &str) -> Option<f64> {
    if !is_memory(s) {
        return None;
    }
    let (number, unit) = BINARY
        .iter()
        .chain(DECIMAL.iter())
        .find_map(|(k, v)| s.strip_suffix(k).map(|n| (n, *v)))
        .unwrap_or((s, 1.0));
    number.parse::<f64>().ok().map(|n| n * unit)
}

/// The value of a CPU quantity in millicores: `Nm` is N, anything else is cores × 1000
/// truncated. `None` unless [`is_cpu`] holds.
pub fn cpu_millicores(s: &str) -> Option<f64> {
    if !is_cpu(s) {
        return None;
    }
    match s.strip_suffix('m') {
        Some(m) => m.parse::<f64>().ok(),
        None => s.parse::<f64>().ok().map(|c| (c * 1000.0).trunc()),
    }
}

/// The number of a percentage (`7%` → 7), if `s` is one with a plain number.
pub fn percentage(s: &str) -> Option<f64> {
    s.strip_suffix('%')
        .filter(|n| is_plain_number(n))
        .and_then(|n| n.parse::<f64>().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_quantities_take_binary_and_decimal_suffixes_and_exponents() {
        for ok in [
            "128Mi", "1Gi", "1e9", "500e6", "1.5Gi", "256", "1E", "2k", "3M", "1e+3", "1E-2Ki",
        ] {
            assert!(is_memory(ok), "{ok} should be a memory quantity");
        }
        for bad in [
            "", "Mi", "-1Gi", "1.Gi", ".5Gi", "1 Gi", "1gi", "1GiB", "1m", "1u", "1e", "7%", "abc",
        ] {
            assert!(!is_memory(bad), "{bad} should not be a memory quantity");
        }
    }

    #[test]
    fn cpu_quantities_are_integer_millicores_or_decimal_cores() {
        for ok in ["100m", "0.5", "1", "16", "2.25"] {
            assert!(is_cpu(ok), "{ok}");
        }
        for bad in ["", "m", "1.5m", "-1", "1e3", "1k", "0.5 ", "1.", "x"] {
            assert!(!is_cpu(bad), "{bad}");
        }
    }

    #[test]
    fn memory_values_multiply_the_number_by_the_suffix() {
        assert_eq!(memory_bytes("1Gi"), Some(1073741824.0));
        assert_eq!(memory_bytes("1.5Gi"), Some(1610612736.0));
        assert_eq!(memory_bytes("512Mi"), Some(536870912.0));
        assert_eq!(memory_bytes("1e9"), Some(1e9));
        assert_eq!(memory_bytes("2k"), Some(2000.0));
        assert_eq!(memory_bytes("1E"), Some(1e18));
        assert_eq!(memory_bytes("1Mb"), None);
    }

    #[test]
    fn cpu_values_are_millicores_with_cores_truncated() {
        assert_eq!(cpu_millicores("100m"), Some(100.0));
        assert_eq!(cpu_millicores("0.5"), Some(500.0));
        assert_eq!(cpu_millicores("4"), Some(4000.0));
        assert_eq!(cpu_millicores("0.0005"), Some(0.0));
        assert_eq!(cpu_millicores("1.2345"), Some(1234.0));
        assert_eq!(cpu_millicores("1k"), None);
    }

    #[test]
    fn percentages_need_a_plain_number_before_the_sign() {
        assert_eq!(percentage("7%"), Some(7.0));
        assert_eq!(percentage("7.5%"), Some(7.5));
        assert_eq!(percentage("100%"), Some(100.0));
        assert_eq!(percentage("%"), None);
        assert_eq!(percentage("-5%"), None);
        assert_eq!(percentage("1e1%"), None);
        assert_eq!(percentage("7"), None);
    }
}
