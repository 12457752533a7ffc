//! Fixed-point helpers for quantities: a magnitude `m` (u128) at a base-10 `scale`, meaning
//! `m × 10^scale`.
//!
//! Upstream keeps arbitrary precision (`inf.Dec`); 38 significant digits cover every quantity
//! Kubernetes can hold exactly (int64 at nano precision needs 28). Beyond that, operations
//! round the magnitude up rather than fail, so nothing a client sends can panic or overflow.

use std::cmp::Ordering;

/// 10^0 ..= 10^38, every power of ten a u128 holds.
const POW10: [u128; 39] = {
    let mut t = [1u128; 39];
    let mut i = 1;
    while i < 39 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// Most significant digits a magnitude may have and still be multiplied by 10 safely.
pub(super) const MAX_DIGITS: i64 = 38;

pub(super) fn pow10(k: u64) -> Option<u128> {
    POW10.get(usize::try_from(k).ok()?).copied()
}

/// Number of decimal digits of `m` (1 for 0).
pub(super) fn digits(m: u128) -> i64 {
    let mut n = 1;
    while n < 39 && m >= POW10[n] {
        n += 1;
    }
    n as i64
}

/// `m × 10^k`, or `None` when it does not fit.
pub(super) fn mul_pow10(m: u128, k: u64) -> Option<u128> {
    if m == 0 {
        return Some(0);
    }
    m.checked_mul(pow10(k)?)
}

/// `ceil(m / 10^k)`.
pub(super) fn ceil_div_pow10(m: u128, k: u64) -> u128 {
    match pow10(k) {
        Some(d) => m / d + u128::from(!m.is_multiple_of(d)),
        None => u128::from(m != 0),
    }
}

/// Moves trailing zeros of the magnitude into the scale; zero becomes `(0, 0)`.
pub(super) fn strip_zeros(mut m: u128, mut scale: i64) -> (u128, i64) {
    if m == 0 {
        return (0, 0);
    }
    while m.is_multiple_of(10) {
        m /= 10;
        scale += 1;
    }
    (m, scale)
}

/// Compares two non-negative fixed-point numbers exactly.
pub(super) fn cmp_mag(a: u128, sa: i64, b: u128, sb: i64) -> Ordering {
    match (a == 0, b == 0) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        _ => {}
    }
    let (oa, ob) = (digits(a) + sa, digits(b) + sb);
    if oa != ob {
        return oa.cmp(&ob);
    }
    // Same order of magnitude: the scales differ by at most 38, so one multiply aligns them.
    if sa >= sb {
        match mul_pow10(a, (sa - sb) as u64) {
            Some(a) => a.cmp(&b),
            None => Ordering::Greater,
        }
    } else {
        match mul_pow10(b, (sb - sa) as u64) {
            Some(b) => a.cmp(&b),
            None => Ordering::Less,
        }
    }
}

/// Brings two magnitudes to one scale: exactly when the result fits, otherwise at a coarser
/// scale with the finer operand rounded up.
pub(super) fn align(a: u128, sa: i64, b: u128, sb: i64) -> (u128, u128, i64) {
    if a == 0 {
        return (0, b, sb);
    }
    if b == 0 {
        return (a, 0, sa);
    }
    let (coarse, sc, fine, sf, swapped) = if sa >= sb {
        (a, sa, b, sb, false)
    } else {
        (b, sb, a, sa, true)
    };
    let room = (MAX_DIGITS - digits(coarse)).max(0);
    let target = sf.max(sc - room);
    let coarse = mul_pow10(coarse, (sc - target) as u64).unwrap_or(u128::MAX);
    let fine = ceil_div_pow10(fine, (target - sf) as u64);
    if swapped {
        (fine, coarse, target)
    } else {
        (coarse, fine, target)
    }
}

/// Signed sum of two fixed-point numbers: `(negative, magnitude, scale)`.
pub(super) fn add_signed(
    (na, a, sa): (bool, u128, i64),
    (nb, b, sb): (bool, u128, i64),
) -> (bool, u128, i64) {
    let (mut a, mut b, mut s) = align(a, sa, b, sb);
    if na == nb {
        loop {
            if let Some(sum) = a.checked_add(b) {
                return (na, sum, s);
            }
            a = ceil_div_pow10(a, 1);
            b = ceil_div_pow10(b, 1);
            s += 1;
        }
    }
    match a.cmp(&b) {
        Ordering::Equal => (false, 0, 0),
        Ordering::Greater => (na, a - b, s),
        Ordering::Less => (nb, b - a, s),
    }
}

/// `ceil(m × 2^shift / 10^k)`, or `None` when the result does not fit. Exact whenever the
/// intermediate product fits in 128 bits; otherwise the remainder is rounded up first.
pub(super) fn mul_pow2_div_pow10_ceil(m: u128, shift: u32, k: u64) -> Option<u128> {
    let (q, mut r, mut k) = match pow10(k) {
        Some(d) => (m / d, m % d, k),
        None => (0, m, k),
    };
    let whole = q.checked_mul(1u128.checked_shl(shift)?)?;
    // Make `r × 2^shift` fit by rounding `r` up at a coarser scale (only for absurd inputs).
    while r != 0 && r.leading_zeros() < shift {
        r = ceil_div_pow10(r, 1);
        k = k.saturating_sub(1);
    }
    let part = ceil_div_pow10(r << shift, k);
    whole.checked_add(part)
}
