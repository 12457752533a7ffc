//! String formats custom resources are checked against (`format: date-time`, `ipv4`, ...).
//!
//! Upstream validates with kube-openapi's `strfmt` registry, after stripping every format it
//! does not support for the node's type (`StripUnsupportedFormatsPostProcessor`): an unknown
//! string format, an integer format other than `int32`/`int64` or a number format other than
//! `float`/`double` is ignored, never an error. Format names are compared with dashes removed
//! (`date-time` is `datetime`). Each check follows the Go function upstream calls (`net.ParseIP`,
//! `time.Parse`, the govalidator patterns); those are reimplemented here, not linked.

use std::sync::LazyLock;

use regex::Regex;

/// String formats supported since Kubernetes 1.0, dashes removed.
const STRING_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

/// The format validation enforces for a node of `type_name` with `format`, or `""`.
pub fn enforced(type_name: &str, int_or_string: bool, format: &str) -> String {
    if format.is_empty() {
        return String::new();
    }
    let ty = if int_or_string { "" } else { type_name };
    let keep = match ty {
        "" | "string" => is_supported_string_format(format),
        "integer" => format == "int32" || format == "int64",
        "number" => format == "float" || format == "double",
        _ => false,
    };
    if keep {
        format.to_string()
    } else {
        String::new()
    }
}

/// Whether upstream knows this string format (else it is stripped and only warned about).
pub fn is_supported_string_format(format: &str) -> bool {
    STRING_FORMATS.contains(&format.replace('-', "").as_str())
}

/// Whether `s` is valid for a string `format` (true for formats that are not string formats).
pub fn validates(format: &str, s: &str) -> bool {
    match format.replace('-', "").as_str() {
        "bsonobjectid" => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => is_request_uri(s),
        "email" => is_email(s),
        "hostname" => is_hostname(s),
        "ipv4" => parse_ip(s).is_some() && s.contains('.'),
        "ipv6" => parse_ip(s).is_some() && s.contains(':'),
        "cidr" => is_cidr(s),
        "mac" => is_mac(s),
        "uuid" => UUID.is_match(s),
        "uuid3" => UUID3.is_match(s),
        "uuid4" => UUID4.is_match(s),
        "uuid5" => UUID5.is_match(s),
        "isbn" => is_isbn(s, 10) || is_isbn(s, 13),
        "isbn10" => is_isbn(s, 10),
        "isbn13" => is_isbn(s, 13),
        "creditcard" => is_credit_card(s),
        "ssn" => s.len() == 11 && SSN.is_match(s),
        "hexcolor" => HEXCOLOR.is_match(s),
        "rgbcolor" => RGBCOLOR.is_match(s),
        "byte" => BASE64.is_match(s),
        "date" => is_date(s),
        "duration" => is_duration(s),
        "datetime" => is_date_time(s),
        _ => true,
    }
}

fn re(pattern: &str) -> Regex {
    // The patterns are constants of this file; a typo is caught by the tests below.
    Regex::new(pattern).unwrap_or_else(|_| Regex::new("$^").expect("the empty pattern compiles"))
}

static UUID: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"));
static UUID3: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID4: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static UUID5: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static HOSTNAME: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$",
    )
});
static CREDIT_CARD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11})$",
    )
});
static ISBN10: LazyLock<Regex> = LazyLock::new(|| re(r"^(?:[0-9]{9}X|[0-9]{10})$"));
static ISBN13: LazyLock<Regex> = LazyLock::new(|| re(r"^(?:[0-9]{13})$"));
static HEXCOLOR: LazyLock<Regex> = LazyLock::new(|| re(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static RGBCOLOR: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$",
    )
});
static BASE64: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$")
});
static SSN: LazyLock<Regex> = LazyLock::new(|| re(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$"));
static DATE_TIME_CLOCK: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
});
static LOOSE_DURATION: LazyLock<Regex> = LazyLock::new(|| re(r"(\d+)\s*([A-Za-zµ]+)"));

/// Go `url.ParseRequestURI`: an absolute URI or an absolute path, without spaces or control
/// characters.
fn is_request_uri(s: &str) -> bool {
    if s.is_empty() || s.chars().any(|c| c.is_control() || c == ' ') {
        return false;
    }
    if s.starts_with('/') {
        return true;
    }
    let Some((scheme, _)) = s.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// Go `net/mail.ParseAddress`, for the forms that matter: `local@domain` or
/// `Name <local@domain>`.
fn is_email(s: &str) -> bool {
    let s = s.trim();
    let addr = match (s.find('<'), s.ends_with('>')) {
        (Some(i), true) => &s[i + 1..s.len() - 1],
        (None, false) => s,
        _ => return false,
    };
    let Some((local, domain)) = addr.rsplit_once('@') else {
        return false;
    };
    let atext = |c: char| c.is_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c) || !c.is_ascii();
    let dot_atom =
        |p: &str| !p.is_empty() && p.split('.').all(|a| !a.is_empty() && a.chars().all(atext));
    let quoted = local.len() >= 2 && local.starts_with('"') && local.ends_with('"');
    (quoted || dot_atom(local)) && dot_atom(domain)
}

/// strfmt `IsHostname`.
fn is_hostname(s: &str) -> bool {
    HOSTNAME.is_match(s) && s.len() <= 255 && s.split('.').all(|p| p.len() <= 63)
}

/// IPv4 the sloppy way Kubernetes parses it (leading zeros allowed), or IPv6.
pub(crate) fn parse_ip(s: &str) -> Option<std::net::IpAddr> {
    if let Some(v4) = parse_ipv4_sloppy(s) {
        return Some(std::net::IpAddr::V4(v4));
    }
    if s.contains(':') && !s.contains('%') {
        return s
            .parse::<std::net::Ipv6Addr>()
            .ok()
            .map(std::net::IpAddr::V6);
    }
    None
}

fn parse_ipv4_sloppy(s: &str) -> Option<std::net::Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut octets = [0u8; 4];
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        octets[i] = p.parse::<u16>().ok().filter(|v| *v <= 255)? as u8;
    }
    Some(std::net::Ipv4Addr::from(octets))
}

/// Go `net.ParseCIDR` (sloppy about leading zeros in IPv4).
fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Some(ip) = parse_ip(ip) else {
        return false;
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    !bits.is_empty()
        && bits.len() <= 3
        && bits.bytes().all(|b| b.is_ascii_digit())
        && !(bits.len() > 1 && bits.starts_with('0'))
        && bits.parse::<u32>().is_ok_and(|b| b <= max)
}

/// Go `net.ParseMAC`: 6, 8 or 20 octets as `xx:xx..`, `xx-xx..` or `xxxx.xxxx..`.
fn is_mac(s: &str) -> bool {
    let hex = |p: &str, n: usize| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit());
    let octets = if s.contains(':') || s.contains('-') {
        let sep = if s.contains(':') { ':' } else { '-' };
        let parts: Vec<&str> = s.split(sep).collect();
        if !parts.iter().all(|p| hex(p, 2)) {
            return false;
        }
        parts.len()
    } else {
        let parts: Vec<&str> = s.split('.').collect();
        if !parts.iter().all(|p| hex(p, 4)) {
            return false;
        }
        parts.len() * 2
    };
    matches!(octets, 6 | 8 | 20)
}

/// govalidator `IsISBN`: digits (spaces and dashes removed) with a valid checksum.
fn is_isbn(s: &str, version: u32) -> bool {
    let clean: Vec<u8> = s
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'-')
        .collect();
    let Ok(clean) = std::str::from_utf8(&clean) else {
        return false;
    };
    let d = |b: u8| i32::from(b - b'0');
    let b = clean.as_bytes();
    if version == 10 {
        if !ISBN10.is_match(clean) {
            return false;
        }
        let mut sum: i32 = (0..9).map(|i| (i as i32 + 1) * d(b[i])).sum();
        sum += if b[9] == b'X' { 100 } else { 10 * d(b[9]) };
        sum % 11 == 0
    } else {
        if !ISBN13.is_match(clean) {
            return false;
        }
        let sum: i32 = (0..12).map(|i| [1, 3][i % 2] * d(b[i])).sum();
        d(b[12]) - ((10 - sum % 10) % 10) == 0
    }
}

/// govalidator `IsCreditCard`: the pattern on the digits, then the Luhn checksum.
fn is_credit_card(s: &str) -> bool {
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    if !CREDIT_CARD.is_match(&digits) {
        return false;
    }
    let mut sum = 0;
    for (i, c) in digits.bytes().rev().enumerate() {
        let mut n = u32::from(c - b'0');
        if i % 2 == 1 {
            n *= 2;
            if n >= 10 {
                n = n % 10 + 1;
            }
        }
        sum += n;
    }
    sum % 10 == 0
}

/// Go `time.Parse("2006-01-02", s)`.
pub(crate) fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        s.get(r)
            .filter(|p| p.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|p| p.parse().ok())
    };
    let (Some(y), Some(m), Some(d)) = (num(0..4), num(5..7), num(8..10)) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// strfmt `IsDateTime`: a date, a `t`, and a clock with an offset.
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    let Some(c) = DATE_TIME_CLOCK.captures(parts[1]) else {
        return false;
    };
    let field = |i: usize| c.get(i).map(|m| m.as_str()).unwrap_or_default();
    field(1) <= "23" && field(2) <= "59" && field(3) <= "59"
}

/// strfmt `IsDuration`: Go's `time.ParseDuration`, or any `<n> <unit>` strfmt understands.
fn is_duration(s: &str) -> bool {
    if apimachinery::time::parse_go_duration(s).is_some() {
        return true;
    }
    const UNITS: &[&[&str]] = &[
        &["ns", "nano"],
        &["us", "µs", "micro"],
        &["ms", "milli"],
        &["s", "sec"],
        &["m", "min"],
        &["h", "hr", "hour"],
        &["d", "day"],
        &["w", "wk", "week"],
    ];
    LOOSE_DURATION.captures_iter(s).any(|c| {
        let unit = c
            .get(2)
            .map(|m| m.as_str().trim().to_lowercase())
            .unwrap_or_default();
        UNITS.iter().any(|variants| {
            variants.iter().enumerate().any(|(i, v)| {
                (i == variants.len() - 1 && unit.starts_with(v)) || unit.eq_ignore_ascii_case(v)
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_supported_format_accepts_a_good_value_and_rejects_a_bad_one() {
        let cases = [
            ("bsonobjectid", "507f1f77bcf86cd799439011", "507f"),
            ("uri", "https://example.com/x", "example.com"),
            ("email", "a.b@example.com", "not-an-email"),
            ("hostname", "my-host.example.com", "-bad-.com"),
            ("ipv4", "10.0.0.1", "10.0.0.256"),
            ("ipv6", "fd00::1", "10.0.0.1"),
            ("cidr", "10.0.0.0/8", "10.0.0.0/33"),
            ("mac", "00:00:5e:00:53:01", "00:00:5e"),
            ("uuid", "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "xyz"),
            (
                "uuid3",
                "a3bb189e-8bf9-3888-9912-ace4e6543002",
                "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
            ),
            (
                "uuid4",
                "57b73598-8764-4ad0-a76a-679bb6640eb1",
                "a3bb189e-8bf9-3888-9912-ace4e6543002",
            ),
            (
                "uuid5",
                "886313e1-3b8a-5372-9b90-0c9aee199e5d",
                "57b73598-8764-4ad0-a76a-679bb6640eb1",
            ),
            ("isbn10", "0321751043", "0321751044"),
            ("isbn13", "978-0321751041", "978-0321751042"),
            ("creditcard", "4111 1111 1111 1111", "4111 1111 1111 1112"),
            ("ssn", "123-45-6789", "123456789"),
            ("hexcolor", "#FFFFFF", "#GGGGGG"),
            ("rgbcolor", "rgb(255, 0, 3)", "rgb(256,0,0)"),
            ("byte", "aGVsbG8=", "not base64!"),
            ("date", "2024-02-29", "2023-02-29"),
            ("duration", "1h30m", "soon"),
            ("date-time", "2024-01-02T03:04:05Z", "2024-01-02 03:04:05"),
        ];
        for (format, good, bad) in cases {
            assert!(validates(format, good), "{format} should accept {good}");
            assert!(!validates(format, bad), "{format} should reject {bad}");
        }
        assert!(validates("password", "anything"));
    }

    #[test]
    fn unsupported_formats_are_not_enforced() {
        assert_eq!(enforced("string", false, "date-time"), "date-time");
        assert_eq!(enforced("string", false, "k8s-resource-name"), "");
        assert_eq!(enforced("integer", false, "int32"), "int32");
        assert_eq!(enforced("integer", false, "uint8"), "");
        assert_eq!(enforced("number", false, "double"), "double");
        assert_eq!(enforced("boolean", false, "date"), "");
        assert_eq!(enforced("", true, "ipv4"), "ipv4");
    }

    #[test]
    fn ipv4_is_parsed_sloppily_like_kubernetes() {
        assert!(validates("ipv4", "010.001.0.1"));
        assert!(
            validates("ipv4", "::ffff:1.2.3.4"),
            "an IPv6 address with a dot passes, as upstream"
        );
    }
}
