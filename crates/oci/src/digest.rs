//! Content digests (`sha256:<hex>`, `sha512:<hex>`): parsing with the spec's rules and hashing
//! while content streams through.

use std::fmt;
use std::str::FromStr;

use sha2::Digest as _;

use crate::error::{Error, ErrorCode, Result};

/// The digest algorithms the registry verifies (the spec's registered ones; sha256 is what
/// every client uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algorithm {
    Sha256,
    Sha512,
}

impl Algorithm {
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha512 => "sha512",
        }
    }

    fn hex_len(self) -> usize {
        match self {
            Algorithm::Sha256 => 64,
            Algorithm::Sha512 => 128,
        }
    }
}

/// A validated digest: a known algorithm and its lowercase hex encoding.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest {
    algorithm: Algorithm,
    hex: String,
}

impl Digest {
    /// Parses `algorithm:hex`; anything malformed or of an unknown algorithm is
    /// `DIGEST_INVALID`.
    pub fn parse(s: &str) -> Result<Digest> {
        let invalid = |why: &str| Error::new(ErrorCode::DigestInvalid, format!("{s:?}: {why}"));
        let (alg, hex) = s.split_once(':').ok_or_else(|| invalid("missing ':'"))?;
        let algorithm = match alg {
            "sha256" => Algorithm::Sha256,
            "sha512" => Algorithm::Sha512,
            _ => return Err(invalid("unsupported digest algorithm")),
        };
        if hex.len() != algorithm.hex_len() {
            return Err(invalid("wrong length for the algorithm"));
        }
        if !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(invalid("not lowercase hexadecimal"));
        }
        Ok(Digest {
            algorithm,
            hex: hex.to_string(),
        })
    }

    /// The sha256 digest of `bytes`.
    pub fn sha256(bytes: &[u8]) -> Digest {
        let mut h = Hasher::new(Algorithm::Sha256);
        h.update(bytes);
        h.finish()
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The encoded part (after the colon).
    pub fn hex(&self) -> &str {
        &self.hex
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.algorithm.as_str(), self.hex)
    }
}

impl FromStr for Digest {
    type Err = Error;

    fn from_str(s: &str) -> Result<Digest> {
        Digest::parse(s)
    }
}

/// A running hash of one algorithm.
#[derive(Clone)]
pub enum Hasher {
    Sha256(sha2::Sha256),
    Sha512(sha2::Sha512),
}

impl Hasher {
    pub fn new(algorithm: Algorithm) -> Hasher {
        match algorithm {
            Algorithm::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
            Algorithm::Sha512 => Hasher::Sha512(sha2::Sha512::new()),
        }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Sha512(h) => h.update(bytes),
        }
    }

    /// The digest of everything fed so far (the hasher itself keeps going).
    pub fn current(&self) -> Digest {
        self.clone().finish()
    }

    pub fn finish(self) -> Digest {
        let (algorithm, bytes) = match self {
            Hasher::Sha256(h) => (Algorithm::Sha256, h.finalize().to_vec()),
            Hasher::Sha512(h) => (Algorithm::Sha512, h.finalize().to_vec()),
        };
        let mut hex = String::with_capacity(bytes.len() * 2);
        for b in bytes {
            hex.push_str(&format!("{b:02x}"));
        }
        Digest { algorithm, hex }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn the_digest_of_nothing_is_the_well_known_one() {
        assert_eq!(Digest::sha256(b"").to_string(), EMPTY);
        assert_eq!(
            Digest::parse(EMPTY).map(|d| d.to_string()).ok(),
            Some(EMPTY.into())
        );
    }

    #[test]
    fn malformed_digests_are_digest_invalid() {
        for bad in [
            "",
            "sha256",
            "sha256:",
            "sha256:abc",
            "md5:d41d8cd98f00b204e9800998ecf8427e",
            &EMPTY.to_uppercase(),
            &EMPTY.replace("sha256", "sha512"),
        ] {
            let e = Digest::parse(bad).expect_err(bad);
            assert_eq!(e.code(), ErrorCode::DigestInvalid, "{bad}");
        }
    }

    #[test]
    fn sha512_digests_are_verified_too() {
        let mut h = Hasher::new(Algorithm::Sha512);
        h.update(b"abc");
        let d = h.finish();
        assert_eq!(d.algorithm(), Algorithm::Sha512);
        assert_eq!(d.hex().len(), 128);
        assert_eq!(Digest::parse(&d.to_string()).ok(), Some(d));
    }
}
