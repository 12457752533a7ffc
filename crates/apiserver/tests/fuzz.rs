//! Fuzzing as part of the suite: every parser a tenant's bytes reach is fed mutated and
//! random input for a bounded number of cases (`FUZZ_CASES`, default 300 per target; each
//! target also stops after `FUZZ_SECONDS`, default 10). The property is the same
//! everywhere: no panic, no stack overflow, an error rather than a crash. Each target starts
//! from a corpus of real inputs kept in `tests/fuzz/corpus/<target>/` (one input per file),
//! mutated by byte flips, truncation, splicing, repetition and nesting; proptest keeps
//! failing cases in `tests/fuzz/regressions.txt` and replays them first.
//!
//! Targets: the body decoders (JSON, YAML, protobuf), JSON, merge and strategic merge
//! patches and server-side apply, label and field selectors, quantities, CEL compilation
//! and evaluation, the router, and continue tokens.

use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use apiserver::negotiate::BodyType;
use bytes::Bytes;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::Value;

fn cases() -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

fn budget() -> Duration {
    Duration::from_secs(
        std::env::var("FUZZ_SECONDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10),
    )
}

/// The seed inputs of `target`.
fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/corpus")
        .join(target);
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the {target} corpus at {}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    let seeds: Vec<Vec<u8>> = entries
        .iter()
        .map(|p| std::fs::read(p).expect("seed"))
        .collect();
    assert!(!seeds.is_empty(), "the {target} corpus is empty");
    seeds
}

/// A mutation of one seed (or of two, spliced).
#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
    Truncate(usize),
    Splice(usize, usize, usize),
    Repeat(usize, usize, u16),
    Nest(u16),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let structural = prop::sample::select(vec![
        b"{".to_vec(),
        b"}".to_vec(),
        b"[".to_vec(),
        b"]".to_vec(),
        b"\"".to_vec(),
        b",".to_vec(),
        b":".to_vec(),
        b"\\u0000".to_vec(),
        b"-1".to_vec(),
        b"1e999".to_vec(),
        b"null".to_vec(),
        b"\xff\xfe".to_vec(),
        b"\n- ".to_vec(),
        b"&a *a".to_vec(),
        b"!!binary".to_vec(),
        b"$patch".to_vec(),
        b"$setElementOrder/".to_vec(),
    ]);
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), structural).prop_map(|(i, s)| Mutation::Insert(i, s)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), any::<usize>(), any::<usize>())
            .prop_map(|(a, b, c)| Mutation::Splice(a, b, c)),
        (any::<usize>(), any::<usize>(), 1u16..2000)
            .prop_map(|(a, b, n)| Mutation::Repeat(a, b, n)),
        (1u16..3000).prop_map(Mutation::Nest),
    ]
}

fn mutate(seeds: &[Vec<u8>], pick: usize, other: usize, ms: &[Mutation]) -> Vec<u8> {
    let mut out = seeds[pick % seeds.len()].clone();
    let donor = &seeds[other % seeds.len()];
    for m in ms {
        let at = |i: usize, len: usize| if len == 0 { 0 } else { i % (len + 1) };
        match m {
            Mutation::Flip(i, b) if !out.is_empty() => {
                let i = i % out.len();
                out[i] ^= b;
            }
            Mutation::Flip(..) => {}
            Mutation::Insert(i, s) => {
                let i = at(*i, out.len());
                out.splice(i..i, s.iter().copied());
            }
            Mutation::Truncate(i) => out.truncate(at(*i, out.len())),
            Mutation::Splice(i, a, b) => {
                let i = at(*i, out.len());
                let (a, b) = (at(*a, donor.len()), at(*b, donor.len()));
                let (a, b) = (a.min(b), a.max(b));
                out.splice(i..i, donor[a..b].iter().copied());
            }
            Mutation::Repeat(a, b, n) => {
                let (a, b) = (at(*a, out.len()), at(*b, out.len()));
                let (a, b) = (a.min(b), a.max(b));
                let piece: Vec<u8> = out[a..b].iter().copied().take(64).collect();
                let mut grown = out[..b].to_vec();
                for _ in 0..*n {
                    grown.extend_from_slice(&piece);
                }
                grown.extend_from_slice(&out[b..]);
                grown.truncate(1 << 20);
                out = grown;
            }
            Mutation::Nest(n) => {
                let n = *n as usize;
                let mut nested = b"{\"a\":".repeat(n);
                nested.extend_from_slice(&out);
                nested.extend(std::iter::repeat_n(b'}', n));
                out = nested;
            }
        }
    }
    out
}

/// Runs `check` on inputs mutated from `target`'s corpus, within the case and time budget.
fn fuzz(target: &str, check: impl Fn(&[u8])) {
    let seeds = corpus(target);
    // Every seed as it is, first.
    for s in &seeds {
        check(s);
    }
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::Direct(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fuzz/regressions.txt"
            )),
        )),
        ..Config::default()
    });
    let started = Instant::now();
    let strategy = (
        any::<usize>(),
        any::<usize>(),
        prop::collection::vec(mutation(), 1..6),
    );
    let result = runner.run(&strategy, |(pick, other, ms)| {
        if started.elapsed() > budget() {
            return Ok(());
        }
        let input = mutate(&seeds, pick, other, &ms);
        check(&input);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{target}: {e}");
    }
}

/// A JSON value from fuzzed bytes, when they parse.
fn json(bytes: &[u8]) -> Option<Value> {
    serde_json::from_slice(bytes).ok()
}

/// Splits a fuzzed input in two at its first `\n---\n` (document and patch).
fn halves(bytes: &[u8]) -> (&[u8], &[u8]) {
    let sep = b"\n---\n";
    match bytes.windows(sep.len()).position(|w| w == sep) {
        Some(i) => (&bytes[..i], &bytes[i + sep.len()..]),
        None => (bytes, b"{}"),
    }
}

static DEPLOYMENTS: LazyLock<registry::ResourceDef> = LazyLock::new(|| {
    registry::builtins::resources()
        .into_iter()
        .find(|r| r.group == "apps" && r.plural == "deployments")
        .expect("deployments")
});

#[test]
fn body_decoders_never_panic() {
    fuzz("decode", |b| {
        let body = Bytes::copy_from_slice(b);
        for ty in [BodyType::Json, BodyType::Yaml, BodyType::Protobuf] {
            let _ = apiserver::codec::decode_as(ty, &body, "application/json");
        }
        let _ = apiserver::codec::yaml(b);
    });
}

#[test]
fn patches_and_apply_never_panic() {
    let schema = DEPLOYMENTS.schema.clone().expect("schema");
    fuzz("patch", |b| {
        let (doc, patch) = halves(b);
        let (Some(doc), Some(patch)) = (json(doc), json(patch)) else {
            return;
        };
        if let Ok(out) = apimachinery::patch::json_patch(&doc, &patch) {
            apimachinery::depth::drop_flat(out);
        }
        if !apimachinery::depth::exceeds(&patch, apimachinery::depth::MAX_DEPTH)
            && !apimachinery::depth::exceeds(&doc, apimachinery::depth::MAX_DEPTH)
        {
            let _ = apimachinery::patch::merge_patch(&doc, &patch);
            let _ = apimachinery::patch::strategic_merge_patch(&doc, &patch, &schema);
            let _ = apimachinery::apply::apply(
                Some(&doc),
                &patch,
                &schema,
                &[],
                "fuzz",
                "apps/v1",
                None,
                false,
                "2026-12-04T00:00:00Z",
                &apimachinery::apply::reset_fields(true, None),
            );
        }
        apimachinery::depth::drop_flat(doc);
        apimachinery::depth::drop_flat(patch);
    });
}

#[test]
fn selectors_and_quantities_never_panic() {
    fuzz("selectors", |b| {
        let s = String::from_utf8_lossy(b);
        let _ = apimachinery::labels::Selector::parse(&s);
        let _ = apimachinery::fields::FieldSelector::parse(&s);
        let _ = apimachinery::fields::unescape_value(&s);
        let _ = apimachinery::quantity::Quantity::parse(&s);
        if let Ok(v) = serde_json::from_slice::<Value>(b) {
            let _ = apimachinery::labels::label_selector_from_json(&v, &Default::default());
        }
    });
}

#[test]
fn cel_compiles_and_evaluates_or_errs() {
    fuzz("cel", |b| {
        let (src, obj) = halves(b);
        let src = String::from_utf8_lossy(src);
        let Ok(program) = crd::cel::compile(&src) else {
            return;
        };
        let obj = json(obj).unwrap_or(Value::Null);
        if apimachinery::depth::exceeds(&obj, apimachinery::depth::MAX_DEPTH) {
            return;
        }
        let vars = controlplane::admission::cel::Vars::default().json("object", Some(&obj));
        let _ = controlplane::admission::cel::eval(&program, &vars);
    });
}

#[test]
fn the_router_and_continue_tokens_never_panic() {
    fuzz("router", |b| {
        let s = String::from_utf8_lossy(b);
        let _ = apiserver::route::route(&s);
        let _ = apiserver::server::Query::parse(Some(&s));
        let _ = storage::ContinueToken::decode(&s, b"/registry/");
    });
}
