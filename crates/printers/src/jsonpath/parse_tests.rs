//! JSONPath parser cases: what parses, to which steps, and what is rejected.

use super::*;

fn parse(path: &str) -> Result<Vec<Node>, String> {
    parse_template(&format!("{{{path}}}"))
}

fn field(s: &str) -> Node {
    Node::Field(s.to_string())
}

#[test]
fn fields_and_escaped_dots_parse() {
    assert_eq!(
        parse(".spec.replicas").unwrap(),
        vec![field("spec"), field("replicas")]
    );
    assert_eq!(
        parse(".metadata.labels.app\\.kubernetes\\.io/name").unwrap(),
        vec![
            field("metadata"),
            field("labels"),
            field("app.kubernetes.io/name")
        ]
    );
    assert_eq!(
        parse(".spec.*").unwrap(),
        vec![field("spec"), Node::Wildcard]
    );
}

#[test]
fn indexes_slices_and_wildcards_parse_to_params() {
    let idx = parse(".a[2]").unwrap();
    assert_eq!(
        idx[1],
        Node::Array([
            Param {
                value: 2,
                known: true,
                derived: false
            },
            Param {
                value: 3,
                known: true,
                derived: true
            },
            Param::default(),
        ])
    );
    let all = parse(".a[*]").unwrap();
    assert_eq!(all[1], Node::Array([Param::default(); 3]));
    let step = parse(".a[1::2]").unwrap();
    assert_eq!(
        step[1],
        Node::Array([
            Param {
                value: 1,
                known: true,
                derived: false
            },
            Param::default(),
            Param {
                value: 2,
                known: true,
                derived: false
            },
        ])
    );
}

#[test]
fn filters_split_into_left_operator_and_right() {
    let nodes = parse(".status.conditions[?(@.type==\"Ready\")].status").unwrap();
    assert_eq!(
        nodes[2],
        Node::Filter {
            left: vec![field("type")],
            op: "==".to_string(),
            right: vec![Node::Text("Ready".to_string())],
        }
    );
    let exists = parse(".items[?(@.ready)]").unwrap();
    assert!(matches!(&exists[1], Node::Filter { op, .. } if op == "exists"));
    let num = parse(".items[?(@.n >= 2.5)]").unwrap();
    assert!(
        matches!(&num[1], Node::Filter { op, right, .. } if op == ">=" && right == &vec![Node::Float(2.5)])
    );
}

#[test]
fn unions_and_dictionary_keys_reparse_as_sub_paths() {
    let union = parse(".a[0,'b']").unwrap();
    assert!(
        matches!(&union[1], Node::Union(parts) if parts.len() == 2 && parts[1] == vec![field("b")])
    );
    assert_eq!(parse("['x.y']").unwrap(), vec![field("x"), field("y")]);
}

#[test]
fn malformed_paths_are_rejected() {
    for bad in [
        ".a[",
        ".a[x]",
        ".a[?(@.b==1)",
        "....a",
        ".a[1:2:3:4]",
        ".a %",
        ".a['x",
    ] {
        assert!(parse(bad).is_err(), "{bad:?} parsed");
    }
    assert!(parse_template("{.a").is_err());
    // Upstream accepts these oddities, so must we.
    assert_eq!(parse("...a").unwrap(), vec![Node::Recursive, field("a")]);
    assert_eq!(parse(".a#").unwrap(), vec![field("a#")]);
}

#[test]
fn arbitrary_short_inputs_never_panic() {
    let alphabet: Vec<char> = ".[]*?()@='\"\\:,-1a{}! ".chars().collect();
    let n = alphabet.len();
    let mut parsed = 0;
    for len in 1..=4u32 {
        for mut code in 0..n.pow(len) {
            let mut s = String::new();
            for _ in 0..len {
                s.push(alphabet[code % n]);
                code /= n;
            }
            if let Ok(nodes) = parse(&s) {
                parsed += 1;
                let path = super::super::JsonPath { nodes };
                let doc = serde_json::json!({"a": [1, {"a": "x"}], "1": null});
                let _ = super::super::eval_first(&path, &doc);
            }
        }
    }
    assert!(parsed > 100, "only {parsed} inputs parsed");
}

#[test]
fn deeply_nested_filters_are_rejected_not_overflowed() {
    let depth = 10_000;
    let path = format!(".a{}@.b{}", "[?(".repeat(depth), ")]".repeat(depth));
    assert!(parse(&path).is_err());
    // Upstream cannot nest filters either: the first `)` ends the outer one.
    assert!(parse(".a[?(@.b[?(@.c)])]").is_err());
    assert!(parse(".a[?(@.b)]").is_ok());
}

#[test]
fn huge_indexes_and_steps_do_not_overflow() {
    let doc = serde_json::json!({"a": [1, 2, 3]});
    for path in [
        ".a[9223372036854775807]",
        ".a[1:3:9223372036854775807]",
        ".a[-9223372036854775808:]",
    ] {
        let p = super::super::JsonPath::parse(path).unwrap();
        let _ = super::super::eval_first(&p, &doc);
    }
}

#[test]
fn quoted_literals_unescape_like_go() {
    assert_eq!(unquote(r#""a\"b\n""#).as_deref(), Some("a\"b\n"));
    assert_eq!(unquote(r"'it\'s'").as_deref(), Some("it's"));
    assert_eq!(unquote(r#""\x41\u00e9""#).as_deref(), Some("Aé"));
    assert_eq!(unquote(r#""\q""#), None);
}
