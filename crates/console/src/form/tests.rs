use serde_json::json;

use super::*;

/// A schema of the TenantCluster spec's shapes: defaults, an enum, bounds, an immutable
/// field, a map of objects, a list of objects, a list of strings, int-or-string, a free-form
/// object and a required property.
fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "version": {"type": "string", "default": "v1.35", "description": "The minor version."},
            "storageClass": {"type": "string", "default": "replicated",
                "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]},
            "workers": {"type": "object", "properties": {
                "provider": {"type": "string", "enum": ["process", "virtual"]},
            }},
            "nodeGroups": {"type": "object", "additionalProperties": {
                "type": "object",
                "required": ["instanceType"],
                "properties": {
                    "minReplicas": {"type": "integer", "minimum": 0, "default": 0},
                    "instanceType": {"type": "string", "default": "u1.medium"},
                    "diskSize": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                    "roles": {"type": "array", "items": {"type": "string"}},
                    "logSerialConsole": {"type": "boolean"},
                },
            }},
            "oidc": {"type": "object", "properties": {
                "users": {"type": "array", "items": {"type": "object", "properties": {
                    "email": {"type": "string"},
                    "role": {"type": "string", "enum": ["admin", "view"]},
                }}},
                "customConfig": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            }},
        },
    })
}

fn render(value: &Value, errors: &Errors, mode: Mode, submitted: Option<&FormData>) -> String {
    Form {
        schema: &schema(),
        root: "spec",
        value,
        errors,
        mode,
        submitted,
    }
    .render()
    .into_string()
}

/// The start tag of the element whose attributes contain `needle`.
fn tag<'a>(html: &'a str, needle: &str) -> &'a str {
    let at = html
        .find(needle)
        .unwrap_or_else(|| panic!("{needle} not in {html}"));
    let start = html[..at].rfind('<').unwrap();
    let end = at + html[at..].find('>').unwrap();
    &html[start..=end]
}

fn form(pairs: &[(&str, &str)]) -> FormData {
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    FormData::from_urlencoded(body.as_bytes())
}

#[test]
fn every_input_is_named_by_its_field_path_and_shows_the_value_or_the_default() {
    let value = json!({"nodeGroups": {"md0": {"minReplicas": 2}}});
    let html = render(&value, &Errors::new(), Mode::Create, None);
    let version = tag(&html, r#"name="spec.version""#);
    assert!(
        version.contains(r#"type="text""#) && version.contains(r#"value="v1.35""#),
        "{version}"
    );
    let min = tag(&html, r#"name="spec.nodeGroups[md0].minReplicas""#);
    assert!(
        min.contains(r#"type="number""#)
            && min.contains(r#"value="2""#)
            && min.contains(r#"min="0""#),
        "{min}"
    );
    assert!(
        tag(&html, r#"name="spec.nodeGroups[md0].instanceType""#).contains(r#"value="u1.medium""#),
        "a default fills an absent field"
    );
    // The description is the input's hint.
    assert!(version.contains(&format!(
        r#"aria-describedby="{}-hint""#,
        id("spec.version")
    )));
    assert!(html.contains("The minor version."));
    // A map entry has its own fieldset with a remove box; a new key can be named.
    assert!(tag(&html, r#"name="_remove""#).contains(r#"value="spec.nodeGroups[md0]""#));
    assert!(html.contains(r#"name="_newkey:spec.nodeGroups""#));
    // Required properties are marked and required.
    assert!(tag(&html, r#"name="spec.nodeGroups[md0].instanceType""#).contains("required"));
    // An enum without a default offers "not set".
    let provider = tag(&html, r#"name="spec.workers.provider""#);
    assert!(provider.starts_with("<select"), "{provider}");
    assert!(
        html.contains(r#"<option value="" selected>(not set)</option>"#),
        "{html}"
    );
    // Free-form objects are JSON; a checkbox follows a hidden false.
    assert!(tag(&html, r#"name="spec.oidc.customConfig""#).starts_with("<textarea"));
    assert!(html.contains(
        r#"<input type="hidden" name="spec.nodeGroups[md0].logSerialConsole" value="false">"#
    ));
}

#[test]
fn an_immutable_field_is_disabled_when_editing_and_kept_when_the_form_is_read() {
    let value = json!({"storageClass": "fast", "version": "v1.34"});
    let create = render(&value, &Errors::new(), Mode::Create, None);
    assert!(!tag(&create, r#"name="spec.storageClass""#).contains("disabled"));
    let edit = render(&value, &Errors::new(), Mode::Edit, None);
    let sc = tag(&edit, r#"name="spec.storageClass""#);
    assert!(
        sc.contains("disabled") && sc.contains(r#"value="fast""#),
        "{sc}"
    );
    assert!(edit.contains("Cannot be changed."));
    // A disabled input is not submitted: the stored value stays.
    let (read, errors) = super::read(
        &schema(),
        "spec",
        &value,
        &form(&[("spec.version", "v1.35")]),
    );
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(read["storageClass"], "fast");
    assert_eq!(read["version"], "v1.35");
}

#[test]
fn a_submitted_form_becomes_json_of_the_schemas_types_over_what_was_there() {
    let base = json!({
        "version": "v1.34",
        "unknownKept": {"a": 1},
        "nodeGroups": {"md0": {"minReplicas": 1, "roles": ["a"]}, "old": {"minReplicas": 3}},
        "oidc": {"users": [{"email": "a@x", "role": "admin"}, {"email": "b@x", "role": "view"}]},
    });
    let submitted = form(&[
        ("spec.version", ""),
        ("spec.workers.provider", "virtual"),
        ("spec.nodeGroups[md0].minReplicas", "2"),
        ("spec.nodeGroups[md0].diskSize", "40Gi"),
        ("spec.nodeGroups[md0].roles", "ingress-nginx\n\n gpu \n"),
        ("spec.nodeGroups[md0].logSerialConsole", "false"),
        ("spec.nodeGroups[md0].logSerialConsole", "true"),
        ("spec.nodeGroups[old].minReplicas", "3"),
        ("_remove", "spec.nodeGroups[old]"),
        ("_newkey:spec.nodeGroups", "md1"),
        ("spec.oidc.users[0].email", "a@x"),
        ("spec.oidc.users[0].role", "view"),
        ("_remove", "spec.oidc.users[1]"),
        ("spec.oidc.customConfig", r#"{"jwt": []}"#),
    ]);
    let (v, errors) = read(&schema(), "spec", &base, &submitted);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        v,
        json!({
            // Emptied: removed, so the server applies the default.
            "unknownKept": {"a": 1},
            "workers": {"provider": "virtual"},
            "nodeGroups": {
                "md0": {"minReplicas": 2, "diskSize": "40Gi", "roles": ["ingress-nginx", "gpu"], "logSerialConsole": true},
                "md1": {},
            },
            "oidc": {"users": [{"email": "a@x", "role": "view"}], "customConfig": {"jwt": []}},
        })
    );
    // int-or-string: digits are a number.
    let (v, _) = read(
        &schema(),
        "spec",
        &base,
        &form(&[("spec.nodeGroups[md0].diskSize", "20")]),
    );
    assert_eq!(v["nodeGroups"]["md0"]["diskSize"], 20);
    // An item is appended to a list of objects on request.
    let append = form(&[("_append", "spec.oidc.users")]);
    assert!(append.reshapes());
    let (v, _) = read(&schema(), "spec", &base, &append);
    assert_eq!(v["oidc"]["users"].as_array().unwrap().len(), 3);
}

#[test]
fn values_the_form_cannot_convert_are_field_errors_and_stay_as_typed() {
    let submitted = form(&[
        ("spec.nodeGroups[md0].minReplicas", "two"),
        ("spec.workers.provider", "vm"),
        ("spec.oidc.customConfig", "{not json"),
    ]);
    let base = json!({"nodeGroups": {"md0": {"minReplicas": 1}}});
    let (_, errors) = read(&schema(), "spec", &base, &submitted);
    assert_eq!(
        errors["spec.nodeGroups[md0].minReplicas"],
        vec![r#"Invalid value: "two": must be a whole number"#.to_string()]
    );
    assert_eq!(
        errors["spec.workers.provider"],
        vec![r#"Unsupported value: "vm": supported values: "process", "virtual""#.to_string()]
    );
    assert!(errors["spec.oidc.customConfig"][0].starts_with("Invalid value: must be JSON"));
    let html = render(&base, &errors, Mode::Create, Some(&submitted));
    let min = tag(&html, r#"name="spec.nodeGroups[md0].minReplicas""#);
    assert!(
        min.contains(r#"value="two""#) && min.contains(r#"aria-invalid="true""#),
        "{min}"
    );
    let fid = id("spec.nodeGroups[md0].minReplicas");
    assert!(
        min.contains(&format!(r#"aria-describedby="{fid}-error""#)),
        "{min}"
    );
    assert!(html.contains(&format!(r#"id="{fid}-error""#)));
}

#[test]
fn the_servers_status_causes_are_shown_next_to_their_fields_and_in_the_summary() {
    let status = json!({
        "kind": "Status", "status": "Failure", "reason": "Invalid", "code": 422,
        "message": "TenantCluster.platform.matryoshka.dev \"a\" is invalid: ...",
        "details": {"causes": [
            {"reason": "FieldValueInvalid", "field": "spec.nodeGroups[md0].minReplicas",
             "message": "Invalid value: -1: spec.nodeGroups[md0].minReplicas in body should be greater than or equal to 0"},
            {"reason": "FieldValueForbidden", "field": "metadata.name", "message": "Forbidden: too long"},
        ]},
    });
    let errors = status_errors(&status);
    assert_eq!(errors.len(), 2);
    let value = json!({"nodeGroups": {"md0": {"minReplicas": -1}}});
    let html = render(&value, &errors, Mode::Create, None);
    assert!(html.contains("should be greater than or equal to 0"));
    let s = summary(&errors).into_string();
    assert!(
        s.contains(&format!(
            r##"href="#{}""##,
            id("spec.nodeGroups[md0].minReplicas")
        )),
        "{s}"
    );
    assert!(s.contains("metadata.name"));
    // A Status without causes is one error for the summary.
    let plain = status_errors(&json!({"message": "forbidden: no"}));
    assert_eq!(plain[""], vec!["forbidden: no".to_string()]);
    assert!(summary(&Errors::new()).into_string().is_empty());
}

#[test]
fn distinct_paths_never_share_an_element_id() {
    assert_ne!(id("spec.a-b"), id("spec.a.b"));
    assert_ne!(id("spec.m[a.b]"), id("spec.m[a_2eb]"));
    assert!(
        id("spec.nodeGroups[md0]")
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    );
}

#[test]
fn markup_is_escaped() {
    let value = json!({"version": "\"><script>alert(1)</script>"});
    let html = render(&value, &Errors::new(), Mode::Create, None);
    assert!(!html.contains("<script>"));
    assert!(html.contains("&lt;script&gt;"));
}

#[test]
fn dotted_map_paths_of_schema_validation_are_bracketed_as_the_form_names_them() {
    let mut errors = Errors::new();
    errors.insert("spec.nodeGroups.md0.minReplicas".into(), vec!["a".into()]);
    errors.insert("spec.nodeGroups[md1].roles".into(), vec!["b".into()]);
    errors.insert("spec.oidc.users[0].role".into(), vec!["c".into()]);
    errors.insert("spec.nodeGroups.md0.unknownField".into(), vec!["d".into()]);
    errors.insert("metadata.name".into(), vec!["e".into()]);
    let n = normalize(&schema(), "spec", errors);
    let keys: Vec<&str> = n.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        vec![
            "metadata.name",
            "spec.nodeGroups.md0.unknownField",
            "spec.nodeGroups[md0].minReplicas",
            "spec.nodeGroups[md1].roles",
            "spec.oidc.users[0].role",
        ]
    );
}
