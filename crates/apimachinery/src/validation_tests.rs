//! Tables of valid and invalid names with upstream's exact messages.

use super::*;

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const NAME_PART_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

#[test]
fn dns1123_subdomain_accepts_dotted_lowercase_names() {
    for ok in [
        "a",
        "ab",
        "a-b",
        "0",
        "a.b",
        "example.com",
        "1.2.3.4",
        "a--b.c",
        &"a".repeat(253),
    ] {
        assert!(is_dns1123_subdomain(ok).is_empty(), "{ok}");
    }
}

#[test]
fn dns1123_subdomain_rejects_with_upstream_message() {
    for bad in ["", "A", "-a", "a-", "a..b", ".a", "a.", "a_b", "a b", "ä"] {
        assert_eq!(is_dns1123_subdomain(bad), vec![SUBDOMAIN_MSG], "{bad:?}");
    }
    assert_eq!(
        is_dns1123_subdomain(&"a".repeat(254)),
        vec!["must be no more than 253 characters"]
    );
}

#[test]
fn dns1123_label_says_dots_are_the_problem_when_they_are() {
    assert!(is_dns1123_label("my-name").is_empty());
    assert!(is_dns1123_label(&"a".repeat(63)).is_empty());
    assert_eq!(is_dns1123_label("a.b"), vec!["must not contain dots"]);
    assert_eq!(is_dns1123_label("A"), vec![LABEL_MSG]);
    assert_eq!(is_dns1123_label("a-"), vec![LABEL_MSG]);
    assert_eq!(
        is_dns1123_label(&"a".repeat(64)),
        vec!["must be no more than 63 characters"]
    );
}

#[test]
fn dns1035_label_requires_a_leading_letter() {
    assert!(is_dns1035_label("my-svc").is_empty());
    assert_eq!(
        is_dns1035_label("1abc"),
        vec![
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
        ]
    );
}

#[test]
fn qualified_names_allow_a_subdomain_prefix() {
    for ok in [
        "a",
        "A",
        "a.b_c-d",
        "example.com/MyName",
        "k8s.io/app",
        &"a".repeat(63),
        &format!("{}/{}", "a".repeat(253), "b".repeat(63)),
    ] {
        assert!(is_qualified_name(ok).is_empty(), "{ok}");
    }
}

#[test]
fn qualified_name_messages_match_upstream() {
    assert_eq!(is_qualified_name("app:"), vec![NAME_PART_MSG]);
    assert_eq!(
        is_qualified_name(""),
        vec![
            "name part must be non-empty".to_string(),
            NAME_PART_MSG.to_string()
        ]
    );
    assert_eq!(
        is_qualified_name("/a"),
        vec!["prefix part must be non-empty"]
    );
    assert_eq!(
        is_qualified_name("a/b/c"),
        vec![
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    );
    assert_eq!(
        is_qualified_name("Example.com/a"),
        vec![format!("prefix part {SUBDOMAIN_MSG}")]
    );
    assert_eq!(
        is_qualified_name(&"a".repeat(64)),
        vec!["name part must be no more than 63 characters"]
    );
}

#[test]
fn label_values_may_be_empty_but_not_odd() {
    assert!(is_valid_label_value("").is_empty());
    assert!(is_valid_label_value("v1.2_3-x").is_empty());
    let msg = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
    assert_eq!(is_valid_label_value("-a"), vec![msg]);
    assert_eq!(is_valid_label_value("a/b"), vec![msg]);
    assert_eq!(
        is_valid_label_value(&"z".repeat(64)),
        vec!["must be no more than 63 characters"]
    );
}

#[test]
fn c_identifiers_start_with_a_letter_or_underscore() {
    assert!(is_c_identifier("_a1").is_empty());
    assert!(is_c_identifier("MY_NAME").is_empty());
    assert_eq!(
        is_c_identifier("1a"),
        vec![
            "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is '[A-Za-z_][A-Za-z0-9_]*')"
        ]
    );
    assert_eq!(is_c_identifier("").len(), 1);
}

#[test]
fn path_segment_names_forbid_dots_slashes_and_percent() {
    assert!(is_path_segment_name("system:admin").is_empty());
    assert_eq!(is_path_segment_name(".."), vec!["may not be '..'"]);
    assert_eq!(
        is_path_segment_name("a/b%"),
        vec!["may not contain '/'", "may not contain '%'"]
    );
    assert!(is_path_segment_prefix("..").is_empty());
}

#[test]
fn generate_name_prefixes_may_end_with_a_dash() {
    assert!(NameRule::DnsSubdomain.check("web-", true).is_empty());
    assert!(NameRule::DnsLabel.check("web-", true).is_empty());
    assert_eq!(
        NameRule::DnsSubdomain.check("web-", false),
        vec![SUBDOMAIN_MSG]
    );
    // Upstream drops two bytes before appending 'a': "a-" masks to "a" ... "ab-" to "aa".
    assert_eq!(mask_trailing_dash("ab-"), "aa");
    assert_eq!(mask_trailing_dash("-"), "-");
    assert_eq!(mask_trailing_dash("é-"), "é-");
}
