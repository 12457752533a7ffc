//! Field selector tables: parsing, escaping, upstream error text and matching.

use super::*;
use serde_json::json;

fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn selectors_parse_and_print_sorted_with_escapes() {
    let table = [
        ("", ""),
        ("metadata.name=web", "metadata.name=web"),
        ("metadata.name==web", "metadata.name=web"),
        ("status.phase!=Running", "status.phase!=Running"),
        ("b=1,a=2", "a=2,b=1"),
        ("a=1,,b=2,", "a=1,b=2"),
        ("spec.nodeName=", "spec.nodeName="),
        (r"x=a\,b\=c\\d", r"x=a\,b\=c\\d"),
    ];
    for (input, want) in table {
        let s = FieldSelector::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
        assert_eq!(s.to_string(), want, "{input:?}");
    }
}

#[test]
fn values_are_unescaped_and_split_at_the_first_operator() {
    let s = FieldSelector::parse(r"x=a\,b\=c\\d").expect("valid");
    assert_eq!(s.requirements()[0].value, r"a,b=c\d");
    // The left side takes no escapes: the first operator wins.
    let s = FieldSelector::parse("a!=b=c").expect_err("unescaped '='");
    assert_eq!(
        s.to_string(),
        "invalid field selector: unescaped character in value: 61"
    );
    let s = FieldSelector::parse("x==!y").expect("valid");
    assert_eq!(s.requirement_for("x"), Some((FieldOperator::Equals, "!y")));
}

#[test]
fn bad_selectors_fail_with_upstream_messages() {
    let table = [
        (
            "metadata.name",
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'",
        ),
        ("a=1,b", "invalid selector: 'a=1,b'; can't understand 'b'"),
        (
            r"x=a\b",
            r"invalid field selector: invalid escape sequence: \b",
        ),
        (
            r"x=a\",
            r"invalid field selector: invalid escape sequence: \",
        ),
        (
            "x=a=b",
            "invalid field selector: unescaped character in value: 61",
        ),
    ];
    for (input, want) in table {
        assert_eq!(
            FieldSelector::parse(input).map_err(|e| e.to_string()),
            Err(want.to_string()),
            "{input:?}"
        );
    }
}

#[test]
fn escape_round_trips_any_value() {
    for v in ["", "plain", r"a,b=c\d", r"\\,,==", "ünï=cödé"] {
        assert_eq!(unescape_value(&escape_value(v)).as_deref(), Ok(v));
    }
}

#[test]
fn absent_fields_read_as_empty_strings() {
    let unscheduled = FieldSelector::parse("spec.nodeName=").expect("valid");
    assert!(unscheduled.matches_map(&set(&[("metadata.name", "p")])));
    assert!(!unscheduled.matches_map(&set(&[("spec.nodeName", "n1")])));
    let not_running = FieldSelector::parse("status.phase!=Running").expect("valid");
    assert!(not_running.matches(&|_| None));
    assert!(!not_running.matches(&|f| (f == "status.phase").then(|| "Running".to_string())));
}

#[test]
fn every_term_must_hold() {
    let s = FieldSelector::parse("metadata.name=web,metadata.namespace=default").expect("valid");
    assert!(s.matches_map(&set(&[
        ("metadata.name", "web"),
        ("metadata.namespace", "default")
    ])));
    assert!(!s.matches_map(&set(&[
        ("metadata.name", "web"),
        ("metadata.namespace", "x")
    ])));
    assert!(FieldSelector::everything().matches_map(&set(&[])));
    assert!(!FieldSelector::nothing().matches_map(&set(&[])));
}

#[test]
fn exact_match_fast_path_finds_the_name() {
    let s = FieldSelector::parse("metadata.name=web,status.phase!=Failed").expect("valid");
    assert_eq!(s.requires_exact_match("metadata.name"), Some("web"));
    assert_eq!(s.requires_exact_match("status.phase"), None);
    assert_eq!(
        s.requirement_for("status.phase"),
        Some((FieldOperator::NotEquals, "Failed"))
    );
    assert_eq!(
        s.fields().collect::<Vec<_>>(),
        ["metadata.name", "status.phase"]
    );
    assert_eq!(
        FieldSelector::one_term_equal("metadata.name", "a,b").to_string(),
        r"metadata.name=a\,b"
    );
}

#[test]
fn transform_refuses_unsupported_labels_and_drops_emptied_terms() {
    let s = FieldSelector::parse("metadata.name=a,spec.foo=b").expect("valid");
    let err = s
        .transform(|f, v| match f {
            "metadata.name" => Ok((f.to_string(), v.to_string())),
            _ => Err(format!("field label not supported: {f}")),
        })
        .expect_err("unsupported");
    assert_eq!(err, "field label not supported: spec.foo");
    let dropped = s
        .transform(|f, v| {
            Ok::<_, ()>(if f == "spec.foo" {
                (String::new(), String::new())
            } else {
                (f.to_string(), v.to_string())
            })
        })
        .expect("ok");
    assert_eq!(dropped.to_string(), "metadata.name=a");
}

#[test]
fn object_meta_fields_cover_name_and_namespace() {
    let obj = json!({"metadata": {"name": "web", "namespace": "default"}});
    assert_eq!(
        object_meta_fields(&obj, true),
        set(&[("metadata.name", "web"), ("metadata.namespace", "default")])
    );
    assert_eq!(
        object_meta_fields(&obj, false),
        set(&[("metadata.name", "web")])
    );
}

#[test]
fn any_accepted_field_selector_round_trips_and_nothing_panics() {
    let alphabet = b"ab.=!,\\ ";
    let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
    let mut accepted = 0;
    for _ in 0..50_000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let len = (seed % 10) as usize;
        let s: String = (0..len)
            .map(|i| char::from(alphabet[((seed >> (i * 6)) as usize) % alphabet.len()]))
            .collect();
        let Ok(sel) = FieldSelector::parse(&s) else {
            continue;
        };
        accepted += 1;
        // Terms sort by source text, so `==` printed as `=` may reorder them; the printed form
        // parses back to the same terms.
        let printed = sel.to_string();
        let again = FieldSelector::parse(&printed).expect("printed form parses");
        let key = |r: &FieldRequirement| {
            (
                r.field.clone(),
                r.operator == FieldOperator::Equals,
                r.value.clone(),
            )
        };
        let mut a: Vec<_> = sel.requirements().iter().map(key).collect();
        let mut b: Vec<_> = again.requirements().iter().map(key).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b, "{s:?} -> {printed:?}");
    }
    assert!(accepted > 500, "only {accepted} accepted");
}
