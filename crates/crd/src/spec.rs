//! Read access to a CustomResourceDefinition (`apiextensions.k8s.io/v1`) as JSON, and its
//! *internal* shape, which is what upstream validates and names in error paths.
//!
//! Upstream converts a v1 CRD to the internal type before validating it; that conversion
//! lifts every per-version field that is identical in all versions (`schema`, `subresources`,
//! `additionalPrinterColumns`, `selectableFields`) to the spec. So a single-version CRD's
//! schema errors are reported at `spec.validation.openAPIV3Schema...`, its printer columns at
//! `spec.additionalPrinterColumns[i]`, while a CRD whose versions differ reports
//! `spec.versions[i].schema.openAPIV3Schema...`. [`Internal`] reproduces that.

use serde_json::Value;

/// Field accessors on a CRD.
#[derive(Debug, Clone, Copy)]
pub struct Crd<'a>(pub &'a Value);

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        match cur.get(p) {
            Some(next) => cur = next,
            None => return "",
        }
    }
    cur.as_str().unwrap_or_default()
}

impl<'a> Crd<'a> {
    pub fn spec(&self) -> &'a Value {
        self.0.get("spec").unwrap_or(&Value::Null)
    }
    pub fn name(&self) -> &'a str {
        str_at(self.0, &["metadata", "name"])
    }
    pub fn group(&self) -> &'a str {
        str_at(self.0, &["spec", "group"])
    }
    pub fn scope(&self) -> &'a str {
        str_at(self.0, &["spec", "scope"])
    }
    pub fn namespaced(&self) -> bool {
        self.scope() != "Cluster"
    }
    pub fn names(&self) -> &'a Value {
        self.spec().get("names").unwrap_or(&Value::Null)
    }
    pub fn name_field(&self, field: &str) -> &'a str {
        str_at(self.names(), &[field])
    }
    pub fn plural(&self) -> &'a str {
        self.name_field("plural")
    }
    pub fn kind(&self) -> &'a str {
        self.name_field("kind")
    }
    pub fn list_kind(&self) -> String {
        match self.name_field("listKind") {
            "" => format!("{}List", self.kind()),
            lk => lk.to_string(),
        }
    }
    pub fn singular(&self) -> String {
        match self.name_field("singular") {
            "" => self.kind().to_lowercase(),
            s => s.to_string(),
        }
    }
    pub fn string_list(v: &Value) -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }
    pub fn short_names(&self) -> Vec<String> {
        Self::string_list(self.names().get("shortNames").unwrap_or(&Value::Null))
    }
    pub fn categories(&self) -> Vec<String> {
        Self::string_list(self.names().get("categories").unwrap_or(&Value::Null))
    }
    pub fn versions(&self) -> &'a [Value] {
        self.spec()
            .get("versions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
    pub fn version(&self, name: &str) -> Option<&'a Value> {
        self.versions()
            .iter()
            .find(|v| v.get("name").and_then(Value::as_str) == Some(name))
    }
    /// The name of the version marked `storage: true` (the first, if several are).
    pub fn storage_version(&self) -> Option<&'a str> {
        self.versions()
            .iter()
            .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
            .and_then(|v| v.get("name").and_then(Value::as_str))
    }
    pub fn conversion_strategy(&self) -> &'a str {
        match str_at(self.spec(), &["conversion", "strategy"]) {
            "" => "None",
            s => s,
        }
    }
    pub fn preserve_unknown_fields(&self) -> bool {
        self.spec()
            .get("preserveUnknownFields")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
    pub fn status(&self) -> &'a Value {
        self.0.get("status").unwrap_or(&Value::Null)
    }
    /// `status.conditions[type=t].status == "True"`.
    pub fn condition_true(&self, t: &str) -> bool {
        self.status()
            .get("conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.get("type").and_then(Value::as_str) == Some(t)
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
            })
    }
}

/// A version's `openAPIV3Schema`, if any.
pub fn version_schema(v: &Value) -> Option<&Value> {
    v.get("schema").and_then(|s| s.get("openAPIV3Schema"))
}

pub fn is_true(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// One per-version field in internal form: lifted to the spec, or left in the versions.
#[derive(Debug, Clone)]
pub struct Lifted<'a> {
    /// The spec-level value when every version has the same one (possibly absent).
    pub spec: Option<&'a Value>,
    /// Whether the field was lifted.
    pub lifted: bool,
}

/// A CRD's per-version fields in upstream's internal form.
#[derive(Debug, Clone)]
pub struct Internal<'a> {
    pub schema: Lifted<'a>,
    pub subresources: Lifted<'a>,
    pub columns: Lifted<'a>,
    pub selectable: Lifted<'a>,
}

fn empty_array(v: Option<&Value>) -> bool {
    v.is_none_or(|v| v.as_array().is_some_and(Vec::is_empty) || v.is_null())
}

fn lift<'a>(versions: &'a [Value], key: &str, array: bool) -> Lifted<'a> {
    let Some(first) = versions.first() else {
        return Lifted {
            spec: None,
            lifted: false,
        };
    };
    let a = first.get(key).filter(|v| !v.is_null());
    let same = versions.iter().all(|v| {
        let b = v.get(key).filter(|v| !v.is_null());
        if array {
            (empty_array(a) && empty_array(b)) || a == b
        } else {
            a == b
        }
    });
    Lifted {
        spec: if same { a } else { None },
        lifted: same,
    }
}

impl<'a> Internal<'a> {
    pub fn of(crd: Crd<'a>) -> Internal<'a> {
        let vs = crd.versions();
        Internal {
            schema: lift(vs, "schema", false),
            subresources: lift(vs, "subresources", false),
            columns: lift(vs, "additionalPrinterColumns", true),
            selectable: lift(vs, "selectableFields", true),
        }
    }

    /// The subresources that apply to a version (the lifted ones, else its own).
    pub fn subresources_for(&self, version: &'a Value) -> Option<&'a Value> {
        if self.subresources.lifted {
            self.subresources.spec
        } else {
            version.get("subresources").filter(|v| !v.is_null())
        }
    }

    /// Whether any version has a status subresource.
    pub fn any_status(&self, crd: Crd<'a>) -> bool {
        crd.versions().iter().any(|v| {
            self.subresources_for(v)
                .is_some_and(|s| s.get("status").is_some_and(|s| !s.is_null()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identical_per_version_fields_are_lifted() {
        let schema = json!({"openAPIV3Schema": {"type": "object"}});
        let crd = json!({"spec": {"versions": [
            {"name": "v1", "schema": schema, "additionalPrinterColumns": []},
            {"name": "v2", "schema": schema}
        ]}});
        let i = Internal::of(Crd(&crd));
        assert!(i.schema.lifted && i.schema.spec == Some(&schema));
        assert!(i.columns.lifted);
        let differ = json!({"spec": {"versions": [
            {"name": "v1", "schema": schema},
            {"name": "v2", "schema": {"openAPIV3Schema": {"type": "object", "description": "x"}}}
        ]}});
        assert!(!Internal::of(Crd(&differ)).schema.lifted);
    }

    #[test]
    fn names_default_like_upstream() {
        let crd = json!({"spec": {"names": {"kind": "Widget"}}});
        assert_eq!(Crd(&crd).list_kind(), "WidgetList");
        assert_eq!(Crd(&crd).singular(), "widget");
    }
}
