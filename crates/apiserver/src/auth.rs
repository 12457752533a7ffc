//! Who is asking: the authenticated user of a request.

use serde_json::{Value, json};

/// An authenticated identity (upstream `user.Info`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: Vec<(String, Vec<String>)>,
}

impl UserInfo {
    /// The identity of in-process system components: a superuser that may use cross-cluster
    /// list and watch.
    pub fn system() -> Self {
        UserInfo {
            name: "system:matryoshka".into(),
            uid: String::new(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
            extra: Vec::new(),
        }
    }

    pub fn anonymous() -> Self {
        UserInfo {
            name: "system:anonymous".into(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".into()],
            extra: Vec::new(),
        }
    }

    /// A user from a client certificate: CN is the name, each O a group.
    pub fn from_cert(cn: &str, orgs: Vec<String>) -> Self {
        let mut groups = orgs;
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".into());
        }
        UserInfo {
            name: cn.into(),
            uid: String::new(),
            groups,
            extra: Vec::new(),
        }
    }

    pub fn is_anonymous(&self) -> bool {
        self.name == "system:anonymous"
    }

    pub fn in_group(&self, g: &str) -> bool {
        self.groups.iter().any(|x| x == g)
    }

    /// The `userInfo` JSON of reviews.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            v["uid"] = json!(self.uid);
        }
        if !self.extra.is_empty() {
            v["extra"] = Value::Object(
                self.extra
                    .iter()
                    .map(|(k, vs)| (k.clone(), json!(vs)))
                    .collect(),
            );
        }
        v
    }
}
