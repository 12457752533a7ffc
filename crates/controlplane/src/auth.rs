//! Who is asking: the authenticated user of a request (the `rbac` crate's `UserInfo`, with the
//! constructors the server needs).

pub use rbac::UserInfo;
use serde_json::{Value, json};

/// The users the server itself makes.
pub trait UserExt: Sized {
    /// The identity of in-process system components: a superuser that may use the
    /// cross-cluster list and watch.
    fn system() -> Self;
    fn anonymous() -> Self;
    /// A user from a verified client certificate: CN is the name, each O a group.
    fn from_cert(cn: &str, orgs: Vec<String>) -> Self;
    fn is_anonymous(&self) -> bool;
    /// The `userInfo` JSON of reviews.
    fn to_json(&self) -> Value;
}

impl UserExt for UserInfo {
    fn system() -> Self {
        UserInfo {
            name: "system:matryoshka".into(),
            uid: String::new(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
            extra: Vec::new(),
        }
    }

    fn anonymous() -> Self {
        UserInfo {
            name: "system:anonymous".into(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".into()],
            extra: Vec::new(),
        }
    }

    fn from_cert(cn: &str, orgs: Vec<String>) -> Self {
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

    fn is_anonymous(&self) -> bool {
        self.name == "system:anonymous"
    }

    fn to_json(&self) -> Value {
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
