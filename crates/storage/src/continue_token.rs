//! Continue tokens for paginated lists.
//!
//! A token names the revision of the first page and the key the next page starts at, so every
//! page is read from the same snapshot. It is opaque to clients: base64url of a small binary
//! record. Tokens for another prefix, malformed tokens and tokens from the future are refused
//! with [`Error::InvalidContinue`]; tokens older than the compacted revision get
//! [`Error::Compacted`] from the backend.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::{Error, Result, Revision};

const MAGIC: &[u8; 3] = b"mt1";

/// A decoded continue token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinueToken {
    /// The revision every page is read at.
    pub revision: Revision,
    /// The first key (inclusive) of the next page.
    pub start: Vec<u8>,
}

impl ContinueToken {
    /// The token for the page that follows `last_key`.
    pub fn after(revision: Revision, last_key: &[u8]) -> Self {
        let mut start = Vec::with_capacity(last_key.len() + 1);
        start.extend_from_slice(last_key);
        start.push(0);
        ContinueToken { revision, start }
    }

    pub fn encode(&self) -> String {
        let mut raw = Vec::with_capacity(MAGIC.len() + 8 + self.start.len());
        raw.extend_from_slice(MAGIC);
        raw.extend_from_slice(&self.revision.to_be_bytes());
        raw.extend_from_slice(&self.start);
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// Decodes `token` and checks that it belongs to a list of `prefix`.
    pub fn decode(token: &str, prefix: &[u8]) -> Result<Self> {
        let raw = URL_SAFE_NO_PAD
            .decode(token.trim_end_matches('='))
            .map_err(|_| Error::InvalidContinue("not base64url".into()))?;
        if raw.len() < MAGIC.len() + 8 || &raw[..MAGIC.len()] != MAGIC {
            return Err(Error::InvalidContinue(
                "not a continue token of this store".into(),
            ));
        }
        let mut rev = [0u8; 8];
        rev.copy_from_slice(&raw[MAGIC.len()..MAGIC.len() + 8]);
        let revision = i64::from_be_bytes(rev);
        if revision <= 0 {
            return Err(Error::InvalidContinue(format!(
                "impossible revision {revision}"
            )));
        }
        let start = raw[MAGIC.len() + 8..].to_vec();
        if !start.starts_with(prefix) || start.len() == prefix.len() {
            return Err(Error::InvalidContinue(
                "the token was issued for another list".into(),
            ));
        }
        Ok(ContinueToken { revision, start })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_round_trips_and_starts_after_the_last_key() {
        let t = ContinueToken::after(42, b"/a/x");
        let back = ContinueToken::decode(&t.encode(), b"/a/").unwrap();
        assert_eq!(back, t);
        assert_eq!(back.start, b"/a/x\0");
    }

    #[test]
    fn a_token_of_another_prefix_is_refused() {
        let t = ContinueToken::after(42, b"/b/x").encode();
        assert!(matches!(
            ContinueToken::decode(&t, b"/a/"),
            Err(Error::InvalidContinue(_))
        ));
    }

    #[test]
    fn garbage_tokens_are_refused() {
        for t in [
            "",
            "!!!",
            "bXQx",
            "AAAAAAAAAAAAAAAAAAAA",
            "bXQxAAAAAAAAAAAA",
        ] {
            assert!(
                matches!(
                    ContinueToken::decode(t, b"/"),
                    Err(Error::InvalidContinue(_))
                ),
                "{t}"
            );
        }
    }
}
