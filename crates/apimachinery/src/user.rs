//! Who is asking: an authenticated identity (upstream `user.Info`) and the well-known users and
//! groups. The server authenticates requests into a [`UserInfo`]; RBAC, admission and reviews
//! read it.

/// The group whose members may do anything (upstream `user.SystemPrivilegedGroup`).
pub const SYSTEM_MASTERS: &str = "system:masters";
/// Every authenticated user is in this group.
pub const ALL_AUTHENTICATED: &str = "system:authenticated";
/// Anonymous requests carry this group.
pub const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
/// Every service account is in this group.
pub const ALL_SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
/// Service-account user names are `system:serviceaccount:<namespace>:<name>`.
pub const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// An authenticated identity (upstream `user.Info`). RBAC reads only the name and groups; the
/// uid and extra values are carried for reviews and impersonation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: Vec<(String, Vec<String>)>,
}

impl UserInfo {
    /// A user with a name and groups and nothing else.
    pub fn new(name: impl Into<String>, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..UserInfo::default()
        }
    }

    /// The user of a service account token: `system:serviceaccount:<ns>:<name>` in
    /// `system:serviceaccounts`, `system:serviceaccounts:<ns>` and `system:authenticated`.
    pub fn service_account(namespace: &str, name: &str) -> UserInfo {
        UserInfo {
            name: service_account_user_name(namespace, name),
            groups: vec![
                ALL_SERVICE_ACCOUNTS.to_string(),
                format!("{ALL_SERVICE_ACCOUNTS}:{namespace}"),
                ALL_AUTHENTICATED.to_string(),
            ],
            ..UserInfo::default()
        }
    }

    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// Members of `system:masters` bypass RBAC and escalation checks.
    pub fn is_superuser(&self) -> bool {
        self.in_group(SYSTEM_MASTERS)
    }
}

/// `system:serviceaccount:<namespace>:<name>`.
pub fn service_account_user_name(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}")
}
