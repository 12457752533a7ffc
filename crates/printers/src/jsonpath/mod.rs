//! The JSONPath dialect of client-go (`k8s.io/client-go/util/jsonpath`), as custom-resource
//! printer columns use it.
//!
//! A column's `jsonPath` is wrapped in braces and parsed as a template; the printer evaluates
//! the first action with missing keys allowed and keeps the first value found. Supported:
//! fields (`.a.b`, `.a\.b`), `.*`, `..` descent, indexes and slices (`[0]`, `[-1]`, `[1:3]`,
//! `[::2]`, `[*]`), unions (`[0,2]`), `['key']`, filters (`[?(@.type=="Ready")]` with
//! `==`, `!=`, `<`, `>`, `<=`, `>=`, or bare existence) and literals. Comparisons follow Go's
//! template rules: an integer never equals a float and comparing a string with a number is an
//! error, which makes the whole column empty, as upstream.
//!
//! Evaluation follows upstream's quirks where they change what a column shows: a missing key
//! yields nothing, indexing a non-list or out of bounds is an error, `['a.b']` is read as two
//! fields. Map iteration (`.*`, `..`) is in sorted key order where Go's is random. The
//! `range`/`end` template keywords parse but fail to evaluate.

mod eval;
mod parse;

use thiserror::Error;

pub(crate) use eval::eval_first;

/// Why a JSONPath expression could not be parsed or evaluated.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum JsonPathError {
    /// The expression is not valid client-go JSONPath.
    #[error("invalid JSONPath {path:?}: {reason}")]
    Parse { path: String, reason: String },
    /// Evaluating the expression against an object failed (wrong type, bad index...).
    #[error("{0}")]
    Eval(String),
}

/// A compiled column expression: the first action of the template `{<jsonPath>}`.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    pub(crate) nodes: Vec<Node>,
}

impl JsonPath {
    /// Compiles a printer column's `jsonPath` (without braces), as upstream does with
    /// `jsonpath.Parse("{" + jsonPath + "}")`.
    pub fn parse(json_path: &str) -> Result<JsonPath, JsonPathError> {
        let template = format!("{{{json_path}}}");
        let nodes = parse::parse_template(&template).map_err(|reason| JsonPathError::Parse {
            path: json_path.to_string(),
            reason,
        })?;
        Ok(JsonPath { nodes })
    }
}

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    /// `.name`: a map key.
    Field(String),
    /// `.*`: every value of a map or element of a list.
    Wildcard,
    /// `..`: the value and every container below it.
    Recursive,
    /// `[start:end:step]` and indexes.
    Array([Param; 3]),
    /// `[a,b]`: several sub-paths, results concatenated.
    Union(Vec<Vec<Node>>),
    /// `[?(left op right)]`, or `[?(left)]` with op `exists`.
    Filter {
        left: Vec<Node>,
        op: String,
        right: Vec<Node>,
    },
    /// A quoted string literal.
    Text(String),
    /// Number and boolean literals.
    Int(i64),
    Float(f64),
    Bool(bool),
    /// A template keyword (`range`, `end`); evaluation fails.
    Identifier(String),
}

/// One slice parameter, as upstream's `ParamsEntry`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Param {
    pub value: i64,
    pub known: bool,
    /// Set for the end of a plain index (`[i]` means `[i:i+1]`).
    pub derived: bool,
}
