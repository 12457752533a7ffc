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

use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt,
};
use cel::common::value::Val;
use cel::objects::{Key, Map};
use cel::{Context, Program, Value as Cel};
use crd::cel::cost;
use crd::cel::library::ENV;
use crd::cel::value::to_cel;
use serde_json::Value;

/// Compiles an admission expression.
pub fn compile(source: &str) -> Result<Program, String> {
    crd::cel::compile(source).map_err(|e| format!("compilation failed: {e}"))
}

/// A variable's value, converted to CEL only if an expression refers to it.
#[derive(Clone)]
pub enum Var<'a> {
    /// A borrowed JSON value (null when absent).
    Json(Option<&'a Value>),
    /// An owned JSON value.
    Owned(Arc<Value>),
    /// A CEL value.
    Cel(Cel),
    /// A JSON value made only when an expression refers to it.
    Lazy(Arc<dyn Fn() -> Value + Send + Sync + 'a>),
}

impl Var<'_> {
    fn to_cel(&self) -> Cel {
        match self {
            Var::Json(v) => to_value(*v),
            Var::Owned(v) => to_cel(v, None, false),
            Var::Cel(c) => c.clone(),
            Var::Lazy(f) => to_cel(&f(), None, false),
        }
    }
}

/// The variables an expression is evaluated with.
#[derive(Default, Clone)]
pub struct Vars<'a> {
    pub values: Vec<(&'static str, Var<'a>)>,
}

/// A JSON value as CEL sees it (null when absent).
pub fn to_value(v: Option<&Value>) -> Cel {
    match v {
        Some(v) => to_cel(v, None, false),
        None => Cel::Null,
    }
}

impl<'a> Vars<'a> {
    /// Binds `name` to a JSON value (null when absent).
    pub fn json(mut self, name: &'static str, v: Option<&'a Value>) -> Self {
        self.values.push((name, Var::Json(v)));
        self
    }

    /// Binds `name` to an owned JSON value.
    pub fn owned(mut self, name: &'static str, v: Arc<Value>) -> Self {
        self.values.push((name, Var::Owned(v)));
        self
    }

    /// Binds `name` to a JSON value `make` makes when an expression refers to it.
    pub fn lazy(mut self, name: &'static str, make: impl Fn() -> Value + Send + Sync + 'a) -> Self {
        self.values.push((name, Var::Lazy(Arc::new(make))));
        self
    }

    /// Binds `name` to a CEL value.
    pub fn cel(mut self, name: &'static str, v: Cel) -> Self {
        self.values.push((name, Var::Cel(v)));
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

/// The size assumed for a lazily made variable (`request`: the request's attributes, which
/// the server makes and bounds).
const LAZY_SIZE: u64 = 1_024;

/// Variables bound once for several programs: binding converts a whole value (an object)
/// into the interpreter's form, so it is done once per variable, and only for the variables
/// the programs refer to.
pub struct Scope<'v> {
    ctx: Context<'v, 'v>,
    /// The bound variables as the cost model sees them.
    shapes: Vec<(&'static str, cost::Shape<'v>)>,
}

/// A JSON value in the interpreter's form, borrowing its strings (what `to_cel` makes
/// without a schema, in one step instead of two).
fn json_val<'v>(v: &'v Value) -> Box<dyn Val + 'v> {
    match v {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Box::new(CelInt::from(i)),
            (None, Some(u)) => Box::new(CelUInt::from(u)),
            _ => Box::new(CelDouble::from(n.as_f64().unwrap_or(0.0))),
        },
        Value::String(s) => Box::new(CelString::from(s.as_str())),
        Value::Array(items) => Box::new(CelList::from(
            items.iter().map(json_val).collect::<Vec<_>>(),
        )),
        Value::Object(m) => Box::new(CelMap::from(
            m.iter()
                .map(|(k, v)| (CelMapKey::from(k.as_str()), json_val(v)))
                .collect::<std::collections::HashMap<_, _>>(),
        )),
    }
}

impl<'v> Scope<'v> {
    /// Binds what `programs` refer to of `vars`.
    pub fn new<'a>(
        vars: &'v Vars<'v>,
        programs: impl IntoIterator<Item = &'a Program>,
    ) -> Scope<'v> {
        let mut needed: Vec<String> = Vec::new();
        for p in programs {
            for v in p.references().variables() {
                if !needed.iter().any(|n| n == v) {
                    needed.push(v.to_string());
                }
            }
        }
        let mut ctx = Context::with_env(ENV.clone());
        let mut shapes = Vec::new();
        for (name, v) in &vars.values {
            if !needed.iter().any(|n| n == name) {
                continue;
            }
            shapes.push((
                *name,
                match v {
                    Var::Json(Some(j)) => cost::Shape::Values(vec![*j]),
                    Var::Owned(j) => cost::Shape::Values(vec![&**j]),
                    Var::Json(None) => cost::Shape::Sized(0),
                    Var::Cel(c) => cost::Shape::Cels(vec![c]),
                    // Made by the server from the request's attributes: small.
                    Var::Lazy(_) => cost::Shape::Sized(LAZY_SIZE),
                },
            ));
            let val: Box<dyn Val + 'v> = match v {
                Var::Json(Some(j)) => json_val(j),
                Var::Json(None) => Box::new(CelNull),
                Var::Owned(j) => json_val(j),
                other => match Box::<dyn Val>::try_from(other.to_cel()) {
                    Ok(b) => b,
                    Err(_) => continue,
                },
            };
            ctx.add_variable_as_val(*name, val);
        }
        Scope { ctx, shapes }
    }

    /// Evaluates one of the programs, unless its cost over the bound values exceeds
    /// upstream's per-call limit (then it is an error of the expression, not run).
    pub fn eval(&self, program: &Program) -> Result<Cel, String> {
        let estimated = cost::estimate(program.expression(), self.shapes.clone());
        if estimated > cost::PER_CALL_LIMIT {
            return Err("operation cancelled: actual cost limit exceeded".into());
        }
        cost::run_costly(estimated, || program.execute(&self.ctx)).map_err(|e| e.to_string())
    }

    /// Evaluates a boolean program.
    pub fn eval_bool(&self, program: &Program) -> Result<bool, String> {
        match self.eval(program)? {
            Cel::Bool(b) => Ok(b),
            other => Err(format!("expected a boolean, got {other:?}")),
        }
    }
}

/// Evaluates `program` with `vars`.
pub fn eval(program: &Program, vars: &Vars) -> Result<Cel, String> {
    Scope::new(vars, [program]).eval(program)
}

/// Evaluates a boolean expression.
pub fn eval_bool(program: &Program, vars: &Vars) -> Result<bool, String> {
    Scope::new(vars, [program]).eval_bool(program)
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
