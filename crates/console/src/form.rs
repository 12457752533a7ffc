//! Forms generated from an OpenAPI v3 schema, as a CRD publishes it.
//!
//! Every input is named by its field path in the syntax of Kubernetes field errors
//! (`spec.nodeGroups[md0].minReplicas`, `spec.oidc.users[0].email`), so an error the API server
//! returns in `Status.details.causes[].field` lands next to its input with no mapping table.
//!
//! What each schema shape becomes:
//! - an object with `properties`: a fieldset of its properties (`required` ones marked);
//! - an object with `additionalProperties` (a map such as `nodeGroups`): a fieldset per key,
//!   each with a remove checkbox, and a text input naming a new key;
//! - an array of objects: a fieldset per item with a remove checkbox, and an add button;
//!   an array of scalars: a textarea, one item per line;
//! - `enum`: a select; `boolean`: a checkbox (after a hidden `false`, so unchecking is seen);
//!   `integer`/`number`: a number input with the schema's bounds; int-or-string and `string`:
//!   a text input; a free-form object (`x-kubernetes-preserve-unknown-fields` without
//!   properties): a JSON textarea.
//!
//! Descriptions are hints tied to their input (`aria-describedby`), so are errors
//! (`aria-invalid`). A field the schema marks immutable (`self == oldSelf`) is disabled when
//! editing; a disabled input is not submitted, and reading the form keeps what was there.
//!
//! Reading a submission starts from the object as it was (`base`) and changes only what the
//! form shows: fields it does not render (unknown fields kept by
//! `x-kubernetes-preserve-unknown-fields`, status) stay as they were. An emptied optional field
//! is removed, so the server applies its default.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use maud::{Markup, html};
use serde_json::{Map, Value};

/// Field errors by path (`spec.nodeGroups[md0].minReplicas`), in the order they were found.
pub type Errors = BTreeMap<String, Vec<String>>;

/// Whether the form creates an object or edits a stored one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Create,
    Edit,
}

/// Names of the form's own controls; never a field path (paths start with a letter).
const REMOVE: &str = "_remove";
const APPEND: &str = "_append";
const NEW_KEY: &str = "_newkey:";

/// A submitted form: every value of every name, in order.
#[derive(Debug, Default, Clone)]
pub struct FormData {
    values: HashMap<String, Vec<String>>,
}

impl FormData {
    /// Reads an `application/x-www-form-urlencoded` body.
    pub fn from_urlencoded(body: &[u8]) -> FormData {
        let mut values: HashMap<String, Vec<String>> = HashMap::new();
        for (k, v) in form_urlencoded::parse(body) {
            values
                .entry(k.into_owned())
                .or_default()
                .push(v.into_owned());
        }
        FormData { values }
    }

    /// The last value given for `name` (a checkbox after its hidden `false`).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .and_then(|v| v.last())
            .map(String::as_str)
    }

    fn all(&self, name: &str) -> &[String] {
        self.values.get(name).map(Vec::as_slice).unwrap_or(&[])
    }

    fn removed(&self) -> BTreeSet<&str> {
        self.all(REMOVE).iter().map(String::as_str).collect()
    }

    fn appended(&self) -> BTreeSet<&str> {
        self.all(APPEND).iter().map(String::as_str).collect()
    }

    fn new_key(&self, path: &str) -> Option<&str> {
        self.get(&format!("{NEW_KEY}{path}"))
            .map(str::trim)
            .filter(|k| !k.is_empty())
    }

    /// Whether the submission asked for a change of the form's shape (an item added or
    /// removed) rather than for saving: the page shows the form again.
    pub fn reshapes(&self) -> bool {
        !self.all(APPEND).is_empty()
    }
}

/// A form over the value at `root` (`spec`) of an object whose schema there is `schema`.
pub struct Form<'a> {
    pub schema: &'a Value,
    pub root: &'a str,
    /// The current value (`Null` when there is none yet).
    pub value: &'a Value,
    pub errors: &'a Errors,
    pub mode: Mode,
    /// What was submitted, shown again as typed (an invalid number stays in its input).
    pub submitted: Option<&'a FormData>,
}

/// The shape of a schema node, as the form treats it.
enum Kind<'s> {
    Object(&'s Map<String, Value>),
    Map(&'s Value),
    List(&'s Value),
    Enum(Vec<String>),
    Boolean,
    Integer,
    Number,
    IntOrString,
    Text,
    FreeForm,
}

fn kind(s: &Value) -> Kind<'_> {
    if s.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        return Kind::IntOrString;
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        let values: Vec<String> = e
            .iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect();
        if values.len() == e.len() && !values.is_empty() {
            return Kind::Enum(values);
        }
    }
    match s.get("type").and_then(Value::as_str) {
        Some("object") => {
            if let Some(p) = s.get("properties").and_then(Value::as_object) {
                Kind::Object(p)
            } else if let Some(a) = s.get("additionalProperties").filter(|a| a.is_object()) {
                Kind::Map(a)
            } else {
                Kind::FreeForm
            }
        }
        Some("array") => match s.get("items") {
            Some(items) => Kind::List(items),
            None => Kind::FreeForm,
        },
        Some("boolean") => Kind::Boolean,
        Some("integer") => Kind::Integer,
        Some("number") => Kind::Number,
        Some("string") => Kind::Text,
        _ => Kind::FreeForm,
    }
}

fn is_scalar(s: &Value) -> bool {
    !matches!(
        kind(s),
        Kind::Object(_) | Kind::Map(_) | Kind::List(_) | Kind::FreeForm
    )
}

fn immutable(s: &Value) -> bool {
    s.get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .is_some_and(|rules| {
            rules.iter().any(|r| {
                r.get("rule")
                    .and_then(Value::as_str)
                    .is_some_and(|rule| rule.replace(' ', "") == "self==oldSelf")
            })
        })
}

fn required_names(s: &Value) -> BTreeSet<&str> {
    s.get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn description(s: &Value) -> Option<&str> {
    s.get("description").and_then(Value::as_str)
}

/// The element id of the input for `path`: letters and digits kept, anything else written as
/// `_` and its hex code, so distinct paths never share an id.
pub fn id(path: &str) -> String {
    let mut out = String::from("f-");
    for c in path.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else {
            out.push_str(&format!("_{:x}", c as u32));
        }
    }
    out
}

fn child(path: &str, name: &str) -> String {
    format!("{path}.{name}")
}

fn entry(path: &str, key: &str) -> String {
    format!("{path}[{key}]")
}

/// The last segment of a path, as its label (`minReplicas`, `md0`, `users[0]`).
fn label_of(path: &str) -> &str {
    match path.rfind('.') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// The scalar a value shows in a text or number input.
fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl Form<'_> {
    /// The whole form's fields (the page adds the `<form>` element, the name and the buttons).
    pub fn render(&self) -> Markup {
        match kind(self.schema) {
            Kind::Object(props) => self.properties(self.root, self.schema, props, Some(self.value)),
            _ => self.field(self.root, self.schema, Some(self.value), false),
        }
    }

    fn properties(
        &self,
        path: &str,
        schema: &Value,
        props: &Map<String, Value>,
        value: Option<&Value>,
    ) -> Markup {
        let required = required_names(schema);
        html! {
            @for (name, s) in props {
                (self.field(&child(path, name), s, value.and_then(|v| v.get(name)), required.contains(name.as_str())))
            }
        }
    }

    fn errors_of(&self, path: &str) -> Option<&Vec<String>> {
        self.errors.get(path).filter(|e| !e.is_empty())
    }

    /// The hint and error lines of a field, and the ids an input refers to.
    fn notes(
        &self,
        path: &str,
        schema: &Value,
        extra_hint: Option<&str>,
    ) -> (Markup, Option<String>) {
        let fid = id(path);
        let desc = description(schema);
        let errors = self.errors_of(path);
        let mut refs = Vec::new();
        if desc.is_some() || extra_hint.is_some() {
            refs.push(format!("{fid}-hint"));
        }
        if errors.is_some() {
            refs.push(format!("{fid}-error"));
        }
        let markup = html! {
            @if desc.is_some() || extra_hint.is_some() {
                p.hint id={(fid) "-hint"} {
                    @if let Some(d) = desc { (d) }
                    @if let Some(h) = extra_hint { " " (h) }
                }
            }
            @if let Some(errs) = errors {
                p.error id={(fid) "-error"} role="alert" {
                    @for (i, e) in errs.iter().enumerate() {
                        @if i > 0 { br; }
                        (e)
                    }
                }
            }
        };
        (markup, (!refs.is_empty()).then(|| refs.join(" ")))
    }

    fn field(&self, path: &str, schema: &Value, value: Option<&Value>, required: bool) -> Markup {
        match kind(schema) {
            Kind::Object(props) => {
                let (notes, _) = self.notes(path, schema, None);
                html! {
                    fieldset id=(id(path)) {
                        legend { (label_of(path)) }
                        (notes)
                        (self.properties(path, schema, props, value))
                    }
                }
            }
            Kind::Map(entry_schema) => self.map(path, schema, entry_schema, value),
            Kind::List(items) => self.list(path, schema, items, value, required),
            _ => self.scalar(path, schema, value, required),
        }
    }

    fn map(
        &self,
        path: &str,
        schema: &Value,
        entry_schema: &Value,
        value: Option<&Value>,
    ) -> Markup {
        let (notes, _) = self.notes(path, schema, None);
        let entries: Vec<(&String, &Value)> = value
            .and_then(Value::as_object)
            .map(|m| m.iter().collect())
            .unwrap_or_default();
        let new_key = format!("{NEW_KEY}{path}");
        let new_id = id(&new_key);
        html! {
            fieldset id=(id(path)) {
                legend { (label_of(path)) }
                (notes)
                @for (key, v) in &entries {
                    @let p = entry(path, key);
                    @if is_scalar(entry_schema) {
                        (self.scalar(&p, entry_schema, Some(v), false))
                    } @else {
                        fieldset id=(id(&p)) {
                            legend { (key) }
                            (self.remove_box(&p))
                            @match kind(entry_schema) {
                                Kind::Object(props) => (self.properties(&p, entry_schema, props, Some(v))),
                                _ => (self.field(&p, entry_schema, Some(v), false)),
                            }
                        }
                    }
                }
                div.add {
                    label for=(new_id) { "New " (label_of(path)) " entry" }
                    input type="text" id=(new_id) name=(new_key) autocomplete="off";
                    button type="submit" name=(APPEND) value=(path) { "Add" }
                }
            }
        }
    }

    fn remove_box(&self, path: &str) -> Markup {
        let rid = id(&format!("{REMOVE}:{path}"));
        html! {
            div.remove {
                input type="checkbox" id=(rid) name=(REMOVE) value=(path);
                label for=(rid) { "Remove " (label_of(path)) }
            }
        }
    }

    fn list(
        &self,
        path: &str,
        schema: &Value,
        items: &Value,
        value: Option<&Value>,
        required: bool,
    ) -> Markup {
        let values: Vec<&Value> = value
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        if is_scalar(items) {
            let text = match self.submitted.and_then(|f| f.get(path)) {
                Some(raw) => raw.to_string(),
                None => values
                    .iter()
                    .map(|v| scalar_text(v))
                    .collect::<Vec<_>>()
                    .join("\n"),
            };
            let (notes, described) = self.notes(path, schema, Some("One per line."));
            let fid = id(path);
            let disabled = self.mode == Mode::Edit && immutable(schema);
            return html! {
                div.field {
                    label for=(fid) { (label_of(path)) @if required { " " span.required { "(required)" } } }
                    textarea id=(fid) name=(path) rows="3" disabled[disabled]
                        aria-invalid=[self.errors_of(path).map(|_| "true")]
                        aria-describedby=[described] { (text) }
                    (notes)
                }
            };
        }
        let (notes, _) = self.notes(path, schema, None);
        html! {
            fieldset id=(id(path)) {
                legend { (label_of(path)) }
                (notes)
                @for (i, v) in values.iter().enumerate() {
                    @let p = entry(path, &i.to_string());
                    fieldset id=(id(&p)) {
                        legend { (label_of(&p)) }
                        (self.remove_box(&p))
                        @match kind(items) {
                            Kind::Object(props) => (self.properties(&p, items, props, Some(v))),
                            _ => (self.field(&p, items, Some(v), false)),
                        }
                    }
                }
                div.add {
                    button type="submit" name=(APPEND) value=(path) { "Add to " (label_of(path)) }
                }
            }
        }
    }

    fn scalar(&self, path: &str, schema: &Value, value: Option<&Value>, required: bool) -> Markup {
        let fid = id(path);
        let shown: Option<&Value> = value.or_else(|| schema.get("default"));
        let raw = self.submitted.and_then(|f| f.get(path));
        let text = raw
            .map(String::from)
            .unwrap_or_else(|| shown.map(scalar_text).unwrap_or_default());
        let disabled = self.mode == Mode::Edit && immutable(schema);
        let k = kind(schema);
        let hint = match (&k, disabled) {
            (_, true) => Some("Cannot be changed."),
            (Kind::FreeForm, _) => Some("JSON."),
            _ => None,
        };
        let (notes, described) = self.notes(path, schema, hint);
        let invalid = self.errors_of(path).map(|_| "true");
        let label = html! {
            label for=(fid) { (label_of(path)) @if required { " " span.required { "(required)" } } }
        };
        let input = match k {
            Kind::Enum(options) => {
                let blank = !required && schema.get("default").is_none();
                html! {
                    select id=(fid) name=(path) required[required] disabled[disabled]
                        aria-invalid=[invalid] aria-describedby=[described.clone()] {
                        @if blank { option value="" selected[text.is_empty()] { "(not set)" } }
                        @for o in &options {
                            option value=(o) selected[*o == text] { (o) }
                        }
                    }
                }
            }
            Kind::Boolean => {
                let checked = match raw {
                    Some(r) => r == "true",
                    None => shown.and_then(Value::as_bool).unwrap_or(false),
                };
                html! {
                    input type="hidden" name=(path) value="false" disabled[disabled];
                    input type="checkbox" id=(fid) name=(path) value="true" checked[checked]
                        disabled[disabled] aria-invalid=[invalid] aria-describedby=[described.clone()];
                }
            }
            Kind::Integer | Kind::Number => {
                let step = if matches!(k, Kind::Integer) {
                    "1"
                } else {
                    "any"
                };
                let min = schema.get("minimum").map(scalar_text);
                let max = schema.get("maximum").map(scalar_text);
                html! {
                    input type="number" id=(fid) name=(path) value=(text) step=(step)
                        min=[min] max=[max] required[required] disabled[disabled]
                        aria-invalid=[invalid] aria-describedby=[described.clone()];
                }
            }
            Kind::FreeForm => {
                let text = raw.map(String::from).unwrap_or_else(|| {
                    value
                        .filter(|v| !v.is_null())
                        .map(|v| serde_json::to_string_pretty(v).unwrap_or_default())
                        .unwrap_or_default()
                });
                html! {
                    textarea id=(fid) name=(path) rows="4" disabled[disabled]
                        aria-invalid=[invalid] aria-describedby=[described.clone()] { (text) }
                }
            }
            _ => {
                let max_len = schema.get("maxLength").map(scalar_text);
                let pattern = schema.get("pattern").and_then(Value::as_str);
                html! {
                    input type="text" id=(fid) name=(path) value=(text) maxlength=[max_len]
                        pattern=[pattern] required[required] disabled[disabled]
                        aria-invalid=[invalid] aria-describedby=[described.clone()];
                }
            }
        };
        html! {
            div.field {
                @if matches!(kind(schema), Kind::Boolean) {
                    (input) (label)
                } @else {
                    (label) (input)
                }
                (notes)
            }
        }
    }
}

/// The errors no rendered field shows (a path the form has no input for), for a summary at
/// the top of the page; every error is listed there too, linked to its field.
pub fn summary(errors: &Errors) -> Markup {
    if errors.values().all(Vec::is_empty) {
        return html! {};
    }
    html! {
        div.errors role="alert" aria-labelledby="errors-title" {
            h2 id="errors-title" { "The request was refused" }
            ul {
                @for (path, msgs) in errors {
                    @for m in msgs {
                        li {
                            @if path.is_empty() { (m) } @else { a href={"#" (id(path))} { (path) } ": " (m) }
                        }
                    }
                }
            }
        }
    }
}

/// Reads a submitted form over `base` (the value at `root` as it was; `Null` when creating).
/// Returns the new value and the fields the form itself could not convert (a number that is
/// not one, JSON that does not parse, a value outside an enum).
pub fn read(schema: &Value, root: &str, base: &Value, form: &FormData) -> (Value, Errors) {
    let mut errors = Errors::new();
    let reader = Reader {
        form,
        removed: form.removed(),
        appended: form.appended(),
    };
    let base = (!base.is_null()).then_some(base);
    let value = reader
        .node(schema, root, base, &mut errors)
        .unwrap_or_else(|| Value::Object(Map::new()));
    (value, errors)
}

struct Reader<'f> {
    form: &'f FormData,
    removed: BTreeSet<&'f str>,
    appended: BTreeSet<&'f str>,
}

impl Reader<'_> {
    /// The new value at `path` (`None`: unset).
    fn node(
        &self,
        schema: &Value,
        path: &str,
        base: Option<&Value>,
        errors: &mut Errors,
    ) -> Option<Value> {
        match kind(schema) {
            Kind::Object(props) => {
                let mut out = base.and_then(Value::as_object).cloned().unwrap_or_default();
                for (name, s) in props {
                    match self.node(
                        s,
                        &child(path, name),
                        base.and_then(|b| b.get(name)),
                        errors,
                    ) {
                        Some(v) => out.insert(name.clone(), v),
                        None => out.remove(name),
                    };
                }
                (!out.is_empty() || base.is_some()).then_some(Value::Object(out))
            }
            Kind::Map(entry_schema) => {
                let before = base.and_then(Value::as_object).cloned().unwrap_or_default();
                let mut keys: Vec<String> = before.keys().cloned().collect();
                if let Some(k) = self.form.new_key(path)
                    && !keys.iter().any(|e| e == k)
                {
                    keys.push(k.to_string());
                }
                let mut out = Map::new();
                for key in keys {
                    let p = entry(path, &key);
                    if self.removed.contains(p.as_str()) {
                        continue;
                    }
                    let v = self
                        .node(entry_schema, &p, before.get(&key), errors)
                        .unwrap_or_else(|| Value::Object(Map::new()));
                    out.insert(key, v);
                }
                (!out.is_empty()).then_some(Value::Object(out))
            }
            Kind::List(items) if is_scalar(items) => match self.form.get(path) {
                None => base.cloned(),
                Some(text) => {
                    let mut out = Vec::new();
                    for (i, line) in text
                        .lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .enumerate()
                    {
                        if let Some(v) =
                            self.convert(items, &entry(path, &i.to_string()), line, errors)
                        {
                            out.push(v);
                        }
                    }
                    (!out.is_empty()).then_some(Value::Array(out))
                }
            },
            Kind::List(items) => {
                let before: Vec<Value> =
                    base.and_then(Value::as_array).cloned().unwrap_or_default();
                let mut out = Vec::new();
                for (i, item) in before.iter().enumerate() {
                    let p = entry(path, &i.to_string());
                    if self.removed.contains(p.as_str()) {
                        continue;
                    }
                    out.push(
                        self.node(items, &p, Some(item), errors)
                            .unwrap_or_else(|| Value::Object(Map::new())),
                    );
                }
                if self.appended.contains(path) {
                    out.push(Value::Object(Map::new()));
                }
                (!out.is_empty()).then_some(Value::Array(out))
            }
            _ => match self.form.get(path) {
                // Not submitted: not shown, or disabled (immutable) — as it was.
                None => base.cloned(),
                Some(text) => self.convert(schema, path, text, errors),
            },
        }
    }

    /// A submitted scalar in its schema's type (`None`: empty, so unset).
    fn convert(
        &self,
        schema: &Value,
        path: &str,
        text: &str,
        errors: &mut Errors,
    ) -> Option<Value> {
        let mut refuse = |msg: String| {
            errors.entry(path.to_string()).or_default().push(msg);
            None
        };
        let k = kind(schema);
        if matches!(k, Kind::Boolean) {
            return Some(Value::Bool(text == "true"));
        }
        let t = text.trim();
        if t.is_empty() {
            return None;
        }
        match k {
            Kind::Enum(options) => {
                if options.iter().any(|o| o == t) {
                    Some(Value::String(t.to_string()))
                } else {
                    let supported: Vec<String> =
                        options.iter().map(|o| format!("\"{o}\"")).collect();
                    refuse(format!(
                        "Unsupported value: \"{t}\": supported values: {}",
                        supported.join(", ")
                    ))
                }
            }
            Kind::Integer => match t.parse::<i64>() {
                Ok(n) => Some(Value::from(n)),
                Err(_) => refuse(format!("Invalid value: \"{t}\": must be a whole number")),
            },
            Kind::Number => match t.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
                Some(n) => Some(Value::Number(n)),
                None => refuse(format!("Invalid value: \"{t}\": must be a number")),
            },
            Kind::IntOrString => match t.parse::<i64>() {
                Ok(n) => Some(Value::from(n)),
                Err(_) => Some(Value::String(t.to_string())),
            },
            Kind::FreeForm => match serde_json::from_str::<Value>(t) {
                Ok(v) => Some(v),
                Err(e) => refuse(format!("Invalid value: must be JSON: {e}")),
            },
            _ => Some(Value::String(text.to_string())),
        }
    }
}

/// Field errors from a Kubernetes `Status` (`details.causes[]`), by field; a cause without a
/// field keys the empty path (shown only in the summary). The `message` of a Status without
/// causes is the one error.
pub fn status_errors(status: &Value) -> Errors {
    let mut errors = Errors::new();
    let causes = status
        .pointer("/details/causes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for c in &causes {
        let field = c.get("field").and_then(Value::as_str).unwrap_or_default();
        let message = c.get("message").and_then(Value::as_str).unwrap_or_default();
        errors
            .entry(field.to_string())
            .or_default()
            .push(message.to_string());
    }
    if causes.is_empty()
        && let Some(m) = status.get("message").and_then(Value::as_str)
    {
        errors.entry(String::new()).or_default().push(m.to_string());
    }
    errors
}

/// The error paths in the form's own syntax. OpenAPI schema validation names a map entry's
/// fields with dots (`spec.nodeGroups.md0.minReplicas`, as upstream's does) while CEL rules and
/// the form use brackets (`spec.nodeGroups[md0].minReplicas`): each path is walked along the
/// schema and its map keys bracketed. A path the schema does not describe stays as it is.
pub fn normalize(schema: &Value, root: &str, errors: Errors) -> Errors {
    let mut out = Errors::new();
    for (path, msgs) in errors {
        let key = canonical(schema, root, &path).unwrap_or(path);
        out.entry(key).or_default().extend(msgs);
    }
    out
}

/// The next segment of a dotted path and what follows it.
fn segment(rest: &str) -> (&str, &str) {
    let end = rest.find(['.', '[']).unwrap_or(rest.len());
    (&rest[..end], &rest[end..])
}

fn canonical(schema: &Value, root: &str, path: &str) -> Option<String> {
    let mut rest = path.strip_prefix(root)?;
    let mut out = root.to_string();
    let mut s = schema;
    while !rest.is_empty() {
        match kind(s) {
            Kind::Object(props) => {
                let (name, tail) = segment(rest.strip_prefix('.')?);
                s = props.get(name)?;
                out.push('.');
                out.push_str(name);
                rest = tail;
            }
            Kind::Map(entry_schema) => {
                let (key, tail) = match rest.strip_prefix('[') {
                    Some(r) => {
                        let end = r.find(']')?;
                        (&r[..end], &r[end + 1..])
                    }
                    None => segment(rest.strip_prefix('.')?),
                };
                out.push_str(&format!("[{key}]"));
                s = entry_schema;
                rest = tail;
            }
            Kind::List(items) => {
                let r = rest.strip_prefix('[')?;
                let end = r.find(']')?;
                out.push_str(&format!("[{}]", &r[..end]));
                s = items;
                rest = &r[end + 1..];
            }
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests;
