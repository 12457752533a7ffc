//! Checks shared by the controllers that own pods through a label selector and a pod template
//! (Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs): the selector, the template
//! matching it, and the restart policy the controller can honour.

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::labels::{
    LabelSelectorOptions, Selector, label_selector_from_json, validate_label_selector,
};
use serde_json::{Value, json};

use super::gofmt;
use super::podspec;
use super::util::{IMMUTABLE, at, str_at};

/// Upstream's `selector` checks of apps/v1 kinds: required, well formed, not empty
/// (`empty selector is invalid for <word>`). Returns the selector when it could be built.
pub(crate) fn required_selector(
    errs: &mut ErrorList,
    spec: &Value,
    path: &Path,
    empty_word: &str,
) -> Option<Selector> {
    let sel_path = path.child("selector");
    let sel = at(spec, "/selector");
    let Some(sel) = sel else {
        errs.push(FieldError::required(&sel_path, ""));
        return Some(Selector::nothing());
    };
    let own = validate_label_selector(sel, LabelSelectorOptions::default(), &sel_path);
    let invalid = !own.is_empty();
    errs.extend(own);
    let labels = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .map_or(0, |m| m.len());
    let exprs = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if labels + exprs == 0 {
        errs.push(gofmt::invalid(
            &sel_path,
            gofmt::label_selector(Some(sel)),
            &format!("empty selector is invalid for {empty_word}"),
        ));
    }
    if invalid {
        return None;
    }
    label_selector_from_json(sel, &sel_path).ok()
}

/// Upstream `ValidatePodTemplateSpecForReplicaSet` (and its RC, DaemonSet and Job cousins):
/// the template's labels must match the selector, then the template itself is validated.
pub(crate) fn template_matches(
    errs: &mut ErrorList,
    selector: Option<&Selector>,
    template: Option<&Value>,
    path: &Path,
) {
    if let Some(sel) = selector
        && !sel.is_empty()
    {
        let labels = template.and_then(|t| t.pointer("/metadata/labels"));
        if !sel.matches_json(labels) {
            errs.push(gofmt::invalid(
                &path.child("metadata").child("labels"),
                gofmt::string_map(labels.filter(|l| l.is_object())),
                "`selector` does not match template `labels`",
            ));
        }
    }
}

/// The checks of a template a long-running controller (`kind`) owns: valid, restarted
/// `Always`, no active deadline.
pub(crate) fn long_running_template(
    errs: &mut ErrorList,
    template: Option<&Value>,
    path: &Path,
    kind: &str,
) {
    podspec::validate_template(errs, template, path);
    restart_always(errs, template, path, kind);
}

/// `restartPolicy` must be `Always` and `activeDeadlineSeconds` unset.
pub(crate) fn restart_always(
    errs: &mut ErrorList,
    template: Option<&Value>,
    path: &Path,
    kind: &str,
) {
    let null = Value::Null;
    let t = template.unwrap_or(&null);
    let policy = str_at(t, "/spec/restartPolicy");
    if policy != "Always" {
        errs.push(FieldError::not_supported(
            path.child("spec").child("restartPolicy"),
            json!(policy),
            &["Always"],
        ));
    }
    if at(t, "/spec/activeDeadlineSeconds").is_some() {
        errs.push(FieldError::forbidden(
            path.child("spec").child("activeDeadlineSeconds"),
            format!("activeDeadlineSeconds in {kind} is not Supported"),
        ));
    }
}

/// `spec.selector` may not change (upstream's apps/v1 and batch/v1 rule).
pub(crate) fn immutable_selector(errs: &mut ErrorList, new: &Value, old: &Value) {
    let (n, o) = (at(new, "/spec/selector"), at(old, "/spec/selector"));
    if n != o {
        errs.push(gofmt::invalid(
            &Path::new("spec").child("selector"),
            gofmt::label_selector(n),
            IMMUTABLE,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_selectors_also_fail_to_match_the_template() {
        let mut errs = ErrorList::new();
        let spec = json!({"template": {"metadata": {"labels": {"app": "a"}}}});
        let sel = required_selector(&mut errs, &spec, &Path::new("spec"), "deployment");
        template_matches(
            &mut errs,
            sel.as_ref(),
            spec.get("template"),
            &Path::new("spec.template"),
        );
        let msgs: Vec<String> = errs.iter().map(FieldError::message).collect();
        assert_eq!(
            msgs,
            vec![
                "spec.selector: Required value",
                "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"a\"}: `selector` does not match template `labels`",
            ]
        );
    }

    #[test]
    fn empty_selectors_are_invalid() {
        let mut errs = ErrorList::new();
        let spec = json!({"selector": {}});
        required_selector(&mut errs, &spec, &Path::new("spec"), "deployment");
        assert_eq!(
            errs.iter().map(FieldError::message).collect::<Vec<_>>(),
            vec![
                "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"
            ]
        );
    }
}
