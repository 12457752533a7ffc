//! Format checks for names, keys and values: DNS-1123 labels and subdomains, qualified names
//! (label and annotation keys), label values, C identifiers and path segments.
//!
//! Each check returns the list of upstream messages (`k8s.io/apimachinery/pkg/util/validation`,
//! wording of Kubernetes 1.34), empty when the value is valid; callers wrap each message in a
//! [`FieldError`](crate::field::FieldError) at their path. The regular expressions are matched by
//! hand (they are tiny), but the messages quote them exactly as upstream prints them, because
//! users and tests compare those strings.
//!
//! [`NameRule`] is upstream's `ValidateNameFunc`: how a resource's `metadata.name` (and
//! `generateName` prefix) must look.

/// Longest DNS-1123 label (namespaces, services, ...).
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// Longest DNS-1123 subdomain (most object names).
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
/// Longest DNS-1035 label.
pub const DNS1035_LABEL_MAX_LENGTH: usize = 63;
/// Longest name part of a qualified name (label key).
pub const QUALIFIED_NAME_MAX_LENGTH: usize = 63;
/// Longest label value.
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const C_IDENTIFIER_FMT: &str = "[A-Za-z_][A-Za-z0-9_]*";
const C_IDENTIFIER_ERR: &str = "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_'";

/// Upstream `MaxLenError`: `must be no more than 63 characters`.
pub fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// Upstream `EmptyError`.
pub fn empty_error() -> &'static str {
    "must be non-empty"
}

/// Upstream `RegexError`: the message, examples and the regex used.
///
/// Upstream joins examples as `'a', ` + ` or ` + `'b', `, which yields the double space in
/// `(e.g. 'MyName',  or 'my.name', ...)`; kept because clients see it.
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push('\'');
        s.push_str(e);
        s.push_str("', ");
    }
    s.push_str("regex used for validation is '");
    s.push_str(fmt);
    s.push_str("')");
    s
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn matches_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            is_lower_alnum(f)
                && is_lower_alnum(l)
                && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

/// `label(\.label)*`
fn matches_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(matches_dns1123_label)
}

/// `[a-z]([-a-z0-9]*[a-z0-9])?`
fn matches_dns1035_label(s: &str) -> bool {
    matches_dns1123_label(s) && s.as_bytes()[0].is_ascii_lowercase()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Upstream `IsDNS1123Label`.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns1123_label(value) {
        if matches_dns1123_subdomain(value) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_ERR,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// Upstream `IsDNS1123Subdomain`.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !matches_dns1123_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// Upstream `IsDNS1035Label`.
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1035_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1035_LABEL_MAX_LENGTH));
    }
    if !matches_dns1035_label(value) {
        errs.push(regex_error(
            DNS1035_LABEL_ERR,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// Upstream `IsQualifiedName`: an optional DNS-subdomain prefix and `/`, then a name of at most
/// 63 characters. Used for label keys, annotation keys (lower-cased first) and finalizers.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push(format!("prefix part {}", empty_error()));
            } else {
                for msg in is_dns1123_subdomain(prefix) {
                    errs.push(format!("prefix part {msg}"));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_ERR,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push(format!("name part {}", empty_error()));
    } else if name.len() > QUALIFIED_NAME_MAX_LENGTH {
        errs.push(format!(
            "name part {}",
            max_len_error(QUALIFIED_NAME_MAX_LENGTH)
        ));
    }
    if !matches_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Upstream `IsValidLabelValue`: empty, or a qualified-name-like string of at most 63 characters.
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !value.is_empty() && !matches_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Upstream `IsCIdentifier` (environment-variable-like names).
pub fn is_c_identifier(value: &str) -> Vec<String> {
    let b = value.as_bytes();
    let ok = match b.first() {
        Some(&f) => {
            (f.is_ascii_alphabetic() || f == b'_')
                && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
        }
        None => false,
    };
    if ok {
        Vec::new()
    } else {
        vec![regex_error(
            C_IDENTIFIER_ERR,
            C_IDENTIFIER_FMT,
            &["my_name", "MY_NAME", "MyName"],
        )]
    }
}

/// Upstream `IsValidPathSegmentName`: names that must survive as one URL path segment
/// (RBAC objects, most custom resources).
pub fn is_path_segment_name(name: &str) -> Vec<String> {
    for illegal in [".", ".."] {
        if name == illegal {
            return vec![format!("may not be '{illegal}'")];
        }
    }
    is_path_segment_prefix(name)
}

/// Upstream `IsValidPathSegmentPrefix`: a `generateName` that will become a path segment.
pub fn is_path_segment_prefix(name: &str) -> Vec<String> {
    ["/", "%"]
        .iter()
        .filter(|illegal| name.contains(*illegal))
        .map(|illegal| format!("may not contain '{illegal}'"))
        .collect()
}

/// How a resource's names must look (upstream `ValidateNameFunc`). `prefix` is true when the
/// value is a `generateName`, to which a random suffix will be appended.
#[derive(Debug, Clone, Copy)]
pub enum NameRule {
    /// DNS-1123 subdomain: most resources.
    DnsSubdomain,
    /// DNS-1123 label: namespaces, nodes-adjacent objects.
    DnsLabel,
    /// DNS-1035 label: services.
    Dns1035Label,
    /// Anything that is a valid path segment: RBAC objects, custom resources.
    PathSegment,
    /// A resource-specific rule.
    Custom(fn(&str, bool) -> Vec<String>),
}

impl NameRule {
    /// The messages for `name`, empty when it is valid.
    pub fn check(self, name: &str, prefix: bool) -> Vec<String> {
        match self {
            NameRule::DnsSubdomain => is_dns1123_subdomain(&prefix_masked(name, prefix)),
            NameRule::DnsLabel => is_dns1123_label(&prefix_masked(name, prefix)),
            NameRule::Dns1035Label => is_dns1035_label(&prefix_masked(name, prefix)),
            NameRule::PathSegment => {
                if prefix {
                    is_path_segment_prefix(name)
                } else {
                    is_path_segment_name(name)
                }
            }
            NameRule::Custom(f) => f(name, prefix),
        }
    }
}

fn prefix_masked(name: &str, prefix: bool) -> String {
    if prefix {
        mask_trailing_dash(name)
    } else {
        name.to_string()
    }
}

/// Upstream `maskTrailingDash`: a `generateName` may end in `-` because a suffix follows.
/// Upstream drops the last *two* bytes and appends `a` (so `ab-` checks as `aa`); kept as is,
/// since it decides which prefixes pass.
pub fn mask_trailing_dash(name: &str) -> String {
    if name.len() > 1 && name.ends_with('-') {
        let cut = name.len() - 2;
        match name.get(..cut) {
            Some(head) => format!("{head}a"),
            // The byte before the dash is inside a multi-byte character: the name is invalid
            // either way, so keep it unmasked and let the check report it.
            None => name.to_string(),
        }
    } else {
        name.to_string()
    }
}

#[cfg(test)]
#[path = "validation_tests.rs"]
mod tests;
