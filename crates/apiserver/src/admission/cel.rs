//! CEL for admission: webhook `matchConditions` and ValidatingAdmissionPolicies.
//!
//! Expressions are compiled with the CRD rules' environment (`crd::cel::library`) and see
//! upstream's admission variables: `object`, `oldObject` (null on create and for a delete's
//! new object), `request` (the AdmissionRequest's attributes), `params`, `namespaceObject`
//! and `variables` (a policy's composed variables). Evaluation time is bounded by the caller
//! (policies run under the request's admission deadline); a runtime error is an error of the
//! expression, which the caller turns into its failure policy's answer.

use std::collections::HashMap;
use std::sync::Arc;

use cel::objects::{Key, Map};
use cel::{Context, Program, Value as Cel};
use crd::cel::library::ENV;
use crd::cel::value::to_cel;
use serde_json::Value;

/// Compiles an admission expression.
pub fn compile(source: &str) -> Result<Program, String> {
    ENV.compile(source)
        .map_err(|e| format!("compilation failed: {e}"))
}

/// The variables an expression is evaluated with.
#[derive(Default)]
pub struct Vars {
    pub values: Vec<(&'static str, Cel)>,
}

impl Vars {
    /// Binds `name` to a JSON value (null when absent).
    pub fn json(mut self, name: &'static str, v: Option<&Value>) -> Self {
        let cel = match v {
            Some(v) => to_cel(v, None, false),
            None => Cel::Null,
        };
        self.values.push((name, cel));
        self
    }

    /// Binds `name` to a CEL value.
    pub fn cel(mut self, name: &'static str, v: Cel) -> Self {
        self.values.push((name, v));
        self
    }
}

/// A CEL map of `variables` from names and values.
pub fn map(entries: Vec<(String, Cel)>) -> Cel {
    let m: HashMap<Key, Cel> = entries
        .into_iter()
        .map(|(k, v)| (Key::from(k), v))
        .collect();
    Cel::Map(Map { map: Arc::new(m) })
}

/// Evaluates `program` with `vars`.
pub fn eval(program: &Program, vars: &Vars) -> Result<Cel, String> {
    let mut ctx = Context::with_env(ENV.clone());
    for (name, v) in &vars.values {
        if let Ok(b) = Box::<dyn cel::common::value::Val>::try_from(v.clone()) {
            ctx.add_variable_as_val(*name, b);
        }
    }
    program.execute(&ctx).map_err(|e| e.to_string())
}

/// Evaluates a boolean expression.
pub fn eval_bool(program: &Program, vars: &Vars) -> Result<bool, String> {
    match eval(program, vars)? {
        Cel::Bool(b) => Ok(b),
        other => Err(format!("expected a boolean, got {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn admission_expressions_see_the_object_and_the_request() {
        let p = compile("object.metadata.name != 'skip' && request.operation == 'CREATE'").unwrap();
        let obj = json!({"metadata": {"name": "a"}});
        let req = json!({"operation": "CREATE"});
        let vars = Vars::default()
            .json("object", Some(&obj))
            .json("oldObject", None)
            .json("request", Some(&req));
        assert_eq!(eval_bool(&p, &vars), Ok(true));
        let skip = json!({"metadata": {"name": "skip"}});
        let vars = Vars::default()
            .json("object", Some(&skip))
            .json("request", Some(&req));
        assert_eq!(eval_bool(&p, &vars), Ok(false));
        assert!(compile("object.").is_err());
    }
}
