//! The cached form's encoder: compact JSON, the same bytes `serde_json::to_vec` writes, with
//! two positions noted on the way — the resourceVersion digits (a DELETED event rewrites only
//! them) and the [`Slot`] where the cluster annotation of a cross-cluster response goes.

use serde_json::{Map, Value};

use super::CLUSTER_ANNOTATION;

/// Where the cluster annotation is inserted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
    /// Right after the `{` of `metadata.annotations` (`empty`: it has no entries).
    Annotations { at: usize, empty: bool },
    /// Right after the `{` of `metadata`, which has no `annotations` (and is never empty: it
    /// holds the resourceVersion).
    Metadata { at: usize },
}

impl Slot {
    pub(super) fn at(self) -> usize {
        match self {
            Slot::Annotations { at, .. } | Slot::Metadata { at } => at,
        }
    }

    pub(super) fn shifted(self, by: isize) -> Slot {
        let shift = |at: usize| at.saturating_add_signed(by);
        match self {
            Slot::Annotations { at, empty } => Slot::Annotations {
                at: shift(at),
                empty,
            },
            Slot::Metadata { at } => Slot::Metadata { at: shift(at) },
        }
    }
}

/// The encoding and the positions recorded while writing it.
pub(super) struct Encoded {
    pub(super) json: Vec<u8>,
    pub(super) rv_at: (usize, usize),
    pub(super) slot: Option<Slot>,
}

/// Writes an object as compact JSON (the same bytes `serde_json::to_vec` writes), noting where
/// the resourceVersion digits are and where the cluster annotation would go.
pub(super) fn encode(obj: &Map<String, Value>, size_hint: usize) -> serde_json::Result<Encoded> {
    let mut out = Vec::with_capacity(size_hint);
    let mut rv_at = (0, 0);
    let mut slot = None;
    out.push(b'{');
    for (i, (k, v)) in obj.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, k)?;
        out.push(b':');
        match v {
            Value::Object(meta) if k == "metadata" => {
                out.push(b'{');
                slot = Some(Slot::Metadata { at: out.len() });
                for (j, (mk, mv)) in meta.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    serde_json::to_writer(&mut out, mk)?;
                    out.push(b':');
                    match mv {
                        // Always the digits of a revision, set by the cache itself.
                        Value::String(rv)
                            if mk == "resourceVersion"
                                && rv.bytes().all(|b| b.is_ascii_digit()) =>
                        {
                            out.push(b'"');
                            let start = out.len();
                            out.extend_from_slice(rv.as_bytes());
                            rv_at = (start, out.len());
                            out.push(b'"');
                        }
                        Value::Object(ann) if mk == "annotations" => {
                            out.push(b'{');
                            slot = (!ann.contains_key(CLUSTER_ANNOTATION)).then_some(
                                Slot::Annotations {
                                    at: out.len(),
                                    empty: ann.is_empty(),
                                },
                            );
                            for (n, (ak, av)) in ann.iter().enumerate() {
                                if n > 0 {
                                    out.push(b',');
                                }
                                serde_json::to_writer(&mut out, ak)?;
                                out.push(b':');
                                serde_json::to_writer(&mut out, av)?;
                            }
                            out.push(b'}');
                        }
                        _ if mk == "annotations" => {
                            // A non-object `annotations`: no place to splice into.
                            slot = None;
                            serde_json::to_writer(&mut out, mv)?;
                        }
                        _ => serde_json::to_writer(&mut out, mv)?,
                    }
                }
                out.push(b'}');
            }
            _ => serde_json::to_writer(&mut out, v)?,
        }
    }
    out.push(b'}');
    // Cached for the object's lifetime: no spare capacity.
    out.shrink_to_fit();
    Ok(Encoded {
        json: out,
        rv_at,
        slot,
    })
}

/// Writes a JSON string.
pub(super) fn write_str(out: &mut Vec<u8>, s: &str) {
    if serde_json::to_writer(&mut *out, s).is_err() {
        out.extend_from_slice(b"\"\"");
    }
}
