//! The CEL environment of CRD rules: the standard library, cel-go's strings and lists
//! extensions (`lowerAscii`, `split`, `indexOf`, `slice`, `distinct`, ...), and Kubernetes'
//! list library (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf` on lists).
//!
//! Not provided (no rule in the test CRDs uses them): the Kubernetes `quantity`, `url`, `ip`,
//! `cidr`, `format` and `authz` libraries, `timestamp`/`duration` (the `cel` crate's chrono
//! feature is off), and cel-go's static type checking and cost estimation.

use std::cmp::Ordering;
use std::sync::{Arc, LazyLock};

use cel::common::types::DYN_TYPE;
use cel::common::types::LIST_TYPE;
use cel::common::value::{CowVal, Val};
use cel::{Env, ExecutionError, Value};

/// The shared environment every rule is compiled and evaluated with.
pub static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    // Registration only fails on a name clash, which the tests below would show.
    let _ = env.add_extension(cel::extensions::strings);
    let _ = env.add_extension(cel::extensions::lists);
    let _ = register(&mut env);
    Arc::new(env)
});

fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    env.add_member_overload(
        "indexOf",
        "list_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )?;
    Ok(())
}

fn to_value(v: &dyn Val) -> Result<Value, ExecutionError> {
    Value::try_from(v)
}

fn owned<'b, 'v>(v: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let boxed: Box<dyn Val> = v.try_into()?;
    Ok(CowVal::Owned(boxed))
}

fn receiver(args: &[CowVal<'_, '_>]) -> Result<Arc<Vec<Value>>, ExecutionError> {
    match args.first().map(|a| to_value(&**a)).transpose()? {
        Some(Value::List(items)) => Ok(items),
        Some(other) => Err(ExecutionError::UnexpectedType {
            got: format!("{other:?}"),
            want: "list".into(),
        }),
        None => Err(ExecutionError::missing_argument_or_target()),
    }
}

fn compare(a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    a.partial_cmp(b)
        .ok_or_else(|| ExecutionError::ValuesNotComparable(a.clone(), b.clone()))
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = receiver(&args)?;
    for w in items.windows(2) {
        if compare(&w[0], &w[1])? == Ordering::Greater {
            return owned(Value::Bool(false));
        }
    }
    owned(Value::Bool(true))
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = receiver(&args)?;
    let mut total = match items.first() {
        Some(Value::Float(_)) => Value::Float(0.0),
        Some(Value::UInt(_)) => Value::UInt(0),
        _ => Value::Int(0),
    };
    for v in items.iter() {
        total = match (&total, v) {
            (Value::Int(a), Value::Int(b)) => Value::Int(
                a.checked_add(*b)
                    .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
            ),
            (Value::UInt(a), Value::UInt(b)) => Value::UInt(a.saturating_add(*b)),
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            _ => return Err(ExecutionError::function_error("sum", "no such overload")),
        };
    }
    owned(total)
}

fn extreme<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    want: Ordering,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = receiver(&args)?;
    let mut best = items
        .first()
        .cloned()
        .ok_or_else(|| ExecutionError::function_error("min/max", "empty list"))?;
    for v in items.iter().skip(1) {
        if compare(v, &best)? == want {
            best = v.clone();
        }
    }
    owned(best)
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, Ordering::Less)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, Ordering::Greater)
}

fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>, last: bool) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = receiver(&args)?;
    let needle = args
        .get(1)
        .map(|a| to_value(&**a))
        .transpose()?
        .ok_or_else(ExecutionError::missing_argument_or_target)?;
    let found = if last {
        items.iter().rposition(|v| *v == needle)
    } else {
        items.iter().position(|v| *v == needle)
    };
    owned(Value::Int(found.map(|i| i as i64).unwrap_or(-1)))
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    find(args, false)
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    find(args, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cel::Context;

    fn eval(src: &str) -> Result<Value, String> {
        let p = ENV.compile(src).map_err(|e| e.to_string())?;
        let ctx = Context::with_env(ENV.clone());
        p.execute(&ctx).map_err(|e| e.to_string())
    }

    #[test]
    fn kubernetes_list_functions_work() {
        assert_eq!(eval("[1, 2, 3].isSorted()"), Ok(Value::Bool(true)));
        assert_eq!(eval("[3, 1].isSorted()"), Ok(Value::Bool(false)));
        assert_eq!(eval("[1, 2, 3].sum()"), Ok(Value::Int(6)));
        assert_eq!(eval("[1.5, 2.5].sum()"), Ok(Value::Float(4.0)));
        assert_eq!(eval("[4, 1, 9].min()"), Ok(Value::Int(1)));
        assert_eq!(eval("[4, 1, 9].max()"), Ok(Value::Int(9)));
        assert_eq!(eval("['a', 'b', 'a'].indexOf('a')"), Ok(Value::Int(0)));
        assert_eq!(eval("['a', 'b', 'a'].lastIndexOf('a')"), Ok(Value::Int(2)));
        assert_eq!(eval("['a'].indexOf('z')"), Ok(Value::Int(-1)));
    }

    #[test]
    fn string_extensions_and_macros_work() {
        assert_eq!(eval("'abc'.indexOf('c')"), Ok(Value::Int(2)));
        assert_eq!(eval("'Ab'.lowerAscii() == 'ab'"), Ok(Value::Bool(true)));
        assert_eq!(
            eval("[1, 2].all(x, x > 0) && [1, 2].exists_one(x, x == 2)"),
            Ok(Value::Bool(true))
        );
        assert_eq!(eval("'abc'.matches('^a.c$')"), Ok(Value::Bool(true)));
        assert_eq!(eval("[1, 1, 2].distinct().size()"), Ok(Value::Int(2)));
    }
}
