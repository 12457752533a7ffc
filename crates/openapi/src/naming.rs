//! Names upstream derives from a group-version: URL prefixes, operationId infixes and tags.

/// The URL prefix of a group-version: `/api/v1` or `/apis/<group>/<version>`.
pub(crate) fn prefix(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

/// The operationId infix of a group-version: `CoreV1`, `AppsV1`, `RbacAuthorizationV1`,
/// `CertManagerIoV1` (upstream drops a `.k8s.io` suffix and camel-cases the rest). With an
/// empty version, the group's own infix (`Apps`).
pub(crate) fn operation_infix(group: &str, version: &str) -> String {
    let group = if group.is_empty() { "core" } else { group };
    let group = group.strip_suffix(".k8s.io").unwrap_or(group);
    let mut out: String = group
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
        .map(capitalize)
        .collect();
    out.push_str(&capitalize(version));
    out
}

/// The tag of a group-version (`core_v1`, `apps_v1`, `rbacAuthorization_v1`), or of a group
/// alone with an empty version (`apps`).
pub(crate) fn tag(group: &str, version: &str) -> String {
    let infix = operation_infix(group, "");
    let mut chars = infix.chars();
    let lowered: String = chars
        .next()
        .map(|c| c.to_ascii_lowercase())
        .into_iter()
        .chain(chars)
        .collect();
    if version.is_empty() {
        lowered
    } else {
        format!("{lowered}_{version}")
    }
}

/// `status` → `Status`.
pub(crate) fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_ascii_uppercase().to_string() + chars.as_str(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_infixes_follow_upstream() {
        assert_eq!(operation_infix("", "v1"), "CoreV1");
        assert_eq!(operation_infix("apps", "v1"), "AppsV1");
        assert_eq!(
            operation_infix("rbac.authorization.k8s.io", "v1"),
            "RbacAuthorizationV1"
        );
        assert_eq!(
            operation_infix("cert-manager.io", "v1alpha2"),
            "CertManagerIoV1alpha2"
        );
        assert_eq!(operation_infix("apps", ""), "Apps");
    }

    #[test]
    fn tags_follow_upstream() {
        assert_eq!(
            tag("rbac.authorization.k8s.io", "v1"),
            "rbacAuthorization_v1"
        );
        assert_eq!(tag("", "v1"), "core_v1");
        assert_eq!(tag("apps", ""), "apps");
        assert_eq!(prefix("", "v1"), "/api/v1");
        assert_eq!(prefix("apps", "v1"), "/apis/apps/v1");
    }
}
