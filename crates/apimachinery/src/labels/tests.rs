//! Label selector tables: canonical round trips, upstream's exact parse errors, matching, and
//! `metav1.LabelSelector` validation paths.

use super::*;
use crate::field::Path;
use serde_json::json;

const NAME_PART_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn selectors_print_in_upstream_canonical_form() {
    let table = [
        ("", ""),
        ("x=a", "x=a"),
        ("x==a", "x==a"),
        ("x!=a", "x!=a"),
        ("x=", "x="),
        ("x", "x"),
        ("!x", "!x"),
        ("x>1", "x>1"),
        ("x<10", "x<10"),
        ("b=1,a=2", "a=2,b=1"),
        ("  x  =  a  ,\ty\n ", "x=a,y"),
        ("x in (b,a,b)", "x in (a,b)"),
        ("x notin (a)", "x notin (a)"),
        ("x in ()", "x in ()"),
        (
            "x in (foo,,baz),y,z notin ()",
            "x in (,baz,foo),y,z notin ()",
        ),
        ("x in (a,,)", "x in (,a)"),
        ("x in (in)", "x in (in)"),
        ("in", "in"),
        ("example.com/app=web,tier", "example.com/app=web,tier"),
    ];
    for (input, want) in table {
        let sel = Selector::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
        assert_eq!(sel.to_string(), want, "{input:?}");
        // The canonical form parses back to the same selector.
        assert_eq!(
            Selector::parse(want).map(|s| s.to_string()),
            Ok(want.to_string())
        );
    }
}

#[test]
fn bad_selectors_fail_with_upstream_messages() {
    let long = format!("good-key={}", "z".repeat(64));
    let table: Vec<(&str, String)> = vec![
        (
            "app:monolith",
            format!("unable to parse requirement: <nil>: Invalid value: \"app:monolith\": {NAME_PART_MSG}"),
        ),
        (
            "a/b/c ?=? def",
            "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".into(),
        ),
        (
            "x=a||y=b",
            format!("unable to parse requirement: values[0][x]: Invalid value: \"a||y\": {LABEL_VALUE_MSG}"),
        ),
        (
            long.as_str(),
            format!("unable to parse requirement: values[0][good-key]: Invalid value: \"{}\": must be no more than 63 characters", "z".repeat(64)),
        ),
        (
            "x>a",
            "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer".into(),
        ),
        (
            "a b",
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt".into(),
        ),
        ("x=a,", "found '', expected: identifier after ','".into()),
        (",x", "found ',', expected: !, identifier, or 'end of string'".into()),
        ("x=a b", "found 'b', expected: ',' or 'end of string'".into()),
        ("!x=a", "found '=', expected: ',' or 'end of string'".into()),
        ("x in a", "unable to parse requirement: found 'a' expected: '('".into()),
        ("x in (a", "unable to parse requirement: found '', expected: ',' or ')'".into()),
        ("x in (a b)", "unable to parse requirement: found 'b', expected: ',' or ')'".into()),
        ("x in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier".into()),
        ("x=(a", "unable to parse requirement: found '(', expected: identifier".into()),
        ("!", "unable to parse requirement: found '', expected: identifier".into()),
        ("=", "found '=', expected: !, identifier, or 'end of string'".into()),
    ];
    for (input, want) in table {
        let got = Selector::parse(input).map(|s| s.to_string());
        assert_eq!(got.map_err(|e| e.to_string()), Err(want), "{input:?}");
    }
}

#[test]
fn requirement_errors_are_aggregated_in_brackets() {
    let err =
        Requirement::new("a b", Operator::In, vec![], &Path::new("spec")).expect_err("invalid");
    assert_eq!(err.len(), 2);
    assert_eq!(
        err.aggregate_message(),
        format!(
            "[spec.key: Invalid value: \"a b\": {NAME_PART_MSG}, spec.values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty]"
        )
    );
}

#[test]
fn matching_follows_upstream_operator_semantics() {
    let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
    let cases = [
        ("", true),
        ("app=web", true),
        ("app==web", true),
        ("app=db", false),
        ("app!=db", true),
        ("missing!=x", true),
        ("app in (db,web)", true),
        ("app notin (db,web)", false),
        ("missing notin (a)", true),
        ("missing in (a)", false),
        ("app", true),
        ("missing", false),
        ("!missing", true),
        ("!app", false),
        ("n>4", true),
        ("n>5", false),
        ("n<6", true),
        ("app>1", false),
        ("missing<1", false),
        ("app=web,tier=front", true),
        ("app=web,tier=back", false),
    ];
    for (sel, want) in cases {
        let s = Selector::parse(sel).expect(sel);
        assert_eq!(s.matches(&l), want, "{sel}");
    }
}

#[test]
fn json_labels_match_like_a_map() {
    let obj = json!({"metadata": {"name": "p", "labels": {"app": "web", "weird": 5}}});
    let s = Selector::parse("app=web").expect("valid");
    assert!(s.matches_object(&obj));
    assert!(
        !Selector::parse("weird")
            .expect("valid")
            .matches_object(&obj)
    );
    assert!(Selector::parse("!app").expect("valid").matches_json(None));
    assert!(!s.matches_object(&json!({"metadata": {}})));
}

#[test]
fn empty_selector_matches_everything_and_nothing_matches_nothing() {
    let everything = Selector::parse("").expect("valid");
    assert!(everything.is_empty());
    assert!(everything.matches(&labels(&[])));
    let nothing = Selector::nothing();
    assert!(!nothing.is_empty());
    assert!(!nothing.matches(&labels(&[])));
    assert_eq!(nothing.to_string(), "");
}

#[test]
fn requires_exact_match_finds_single_valued_equality() {
    let s = Selector::parse("a=1,b in (2),c in (3,4),d!=5").expect("valid");
    assert_eq!(s.requires_exact_match("a"), Some("1"));
    assert_eq!(s.requires_exact_match("b"), Some("2"));
    assert_eq!(s.requires_exact_match("c"), None);
    assert_eq!(s.requires_exact_match("d"), None);
    assert_eq!(s.requires_exact_match("z"), None);
}

#[test]
fn from_set_builds_sorted_equality_selectors() {
    let set = labels(&[("tier", "db"), ("app", "web")]);
    let s = Selector::from_set(&set);
    assert_eq!(s.to_string(), "app=web,tier=db");
    assert!(s.matches(&set));
}

#[test]
fn label_selector_json_converts_to_canonical_string() {
    let sel = json!({
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["b", "a"]},
            {"key": "legacy", "operator": "DoesNotExist"},
            {"key": "env", "operator": "NotIn", "values": ["prod"]},
            {"key": "team", "operator": "Exists", "values": []}
        ]
    });
    let s = label_selector_from_json(&sel, &Path::new("spec.selector")).expect("valid");
    assert_eq!(
        s.to_string(),
        "app=web,env notin (prod),!legacy,team,tier in (a,b)"
    );
    assert!(s.matches(&labels(&[("app", "web"), ("tier", "a"), ("team", "x")])));
    assert!(!s.matches(&labels(&[("app", "web"), ("tier", "c"), ("team", "x")])));
}

#[test]
fn null_label_selector_matches_nothing_and_empty_matches_everything() {
    let p = Path::new("spec.selector");
    let null = label_selector_from_json(&serde_json::Value::Null, &p).expect("valid");
    assert!(null.is_nothing());
    let empty = label_selector_from_json(&json!({}), &p).expect("valid");
    assert!(empty.is_empty());
    assert!(empty.matches(&labels(&[("a", "b")])));
}

#[test]
fn label_selector_errors_carry_field_paths() {
    let sel = json!({
        "matchLabels": {"a b": "ok", "k": "-bad"},
        "matchExpressions": [
            {"key": "k", "operator": "In"},
            {"key": "k", "operator": "Exists", "values": ["x"]},
            {"key": "k", "operator": "Foo"},
            {"key": "k", "operator": "In", "values": ["-x"]}
        ]
    });
    let errs = label_selector_from_json(&sel, &Path::new("spec.selector")).expect_err("invalid");
    let msgs: Vec<String> = errs.iter().map(|e| e.message()).collect();
    assert_eq!(
        msgs,
        vec![
            format!("spec.selector.matchLabels: Invalid value: \"a b\": {NAME_PART_MSG}"),
            format!("spec.selector.matchLabels: Invalid value: \"-bad\": {LABEL_VALUE_MSG}"),
            "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'".to_string(),
            "spec.selector.matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'".to_string(),
            "spec.selector.matchExpressions[2].operator: Invalid value: \"Foo\": not a valid selector operator".to_string(),
            format!("spec.selector.matchExpressions[3].values[0]: Invalid value: \"-x\": {LABEL_VALUE_MSG}"),
        ]
    );
}

#[test]
fn validation_options_relax_operator_and_value_checks() {
    let sel = json!({"matchExpressions": [{"key": "k", "operator": "Foo", "values": ["-x"]}]});
    let opts = LabelSelectorOptions {
        allow_invalid_label_value: true,
        allow_unknown_operator: true,
    };
    assert!(validate_label_selector(&sel, opts, &Path::new("s")).is_empty());
    assert_eq!(
        validate_label_selector(&sel, LabelSelectorOptions::default(), &Path::new("s")).len(),
        2
    );
}

#[test]
fn label_selector_type_errors_do_not_panic() {
    let p = Path::new("spec.selector");
    for bad in [
        json!("app=web"),
        json!({"matchLabels": []}),
        json!({"matchLabels": {"a": 1}}),
        json!({"matchExpressions": {}}),
        json!({"matchExpressions": [1]}),
        json!({"matchExpressions": [{"key": 1, "operator": "Exists"}]}),
        json!({"matchExpressions": [{"key": "k", "operator": "In", "values": [1]}]}),
        json!({"matchExpressions": [{"key": "k", "operator": "In", "values": "a"}]}),
    ] {
        assert!(label_selector_from_json(&bad, &p).is_err(), "{bad}");
    }
}

#[test]
fn any_accepted_selector_round_trips_through_its_canonical_form() {
    let alphabet = b"ab=!(),<> 1-";
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut accepted = 0;
    for _ in 0..50_000 {
        let mut s = String::new();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let len = (seed % 12) as usize;
        for i in 0..len {
            let pick = ((seed >> (i * 5)) as usize + i * 7) % (alphabet.len() + 2);
            match pick {
                p if p < alphabet.len() => s.push(char::from(alphabet[p])),
                p if p == alphabet.len() => s.push_str(" in "),
                _ => s.push_str(" notin "),
            }
        }
        let Ok(sel) = Selector::parse(&s) else {
            continue;
        };
        accepted += 1;
        let printed = sel.to_string();
        assert_eq!(
            Selector::parse(&printed).map(|s| s.to_string()),
            Ok(printed.clone()),
            "{s:?}"
        );
    }
    assert!(accepted > 500, "only {accepted} accepted");
}
