//! SPDY/3 name/value header blocks (the uncompressed form inside SYN_STREAM, SYN_REPLY and
//! HEADERS frames).
//!
//! A block is a 32-bit pair count, then per pair a 32-bit length and the name, a 32-bit length
//! and the value; several values of one name travel NUL-separated. Names are lower-case on the
//! wire (SPDY/3 §2.6.10); Kubernetes' own names (`streamType`, `requestID`, `port`) are
//! matched case-insensitively, the way Go's `http.Header` canonicalises them.

use thiserror::Error;

/// Why a decompressed header block was refused. These are stream errors: the compression
/// context stays in step, so the connection survives and the stream is reset.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum HeaderError {
    /// The block ends inside a length or a string.
    #[error("header block is truncated")]
    Truncated,
    /// Bytes follow the last pair the count announced.
    #[error("header block has {0} bytes after its last pair")]
    TrailingBytes(usize),
    /// A name is empty.
    #[error("header block has an empty name")]
    EmptyName,
    /// A name has upper-case letters, which SPDY/3 forbids.
    #[error("header name {0:?} is not lower-case")]
    UppercaseName(String),
    /// A name appears twice.
    #[error("header name {0:?} appears twice")]
    DuplicateName(String),
    /// A name or value is not UTF-8.
    #[error("header block has a name or value that is not UTF-8")]
    NotUtf8,
}

/// The headers of a stream, in the order they were given. Names are stored lower-case.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Headers {
    entries: Vec<(String, String)>,
}

impl Headers {
    /// No headers (what a SYN_REPLY of Kubernetes carries).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `name` to `value`, replacing earlier values of that name.
    pub fn insert(&mut self, name: &str, value: impl Into<String>) {
        let name = name.to_ascii_lowercase();
        let value = value.into();
        match self.entries.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = value,
            None => self.entries.push((name, value)),
        }
    }

    /// Adds one more value to `name` (sent NUL-separated).
    pub fn append(&mut self, name: &str, value: &str) {
        let name = name.to_ascii_lowercase();
        match self.entries.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => {
                entry.1.push('\0');
                entry.1.push_str(value);
            }
            None => self.entries.push((name, value.to_string())),
        }
    }

    /// The first value of `name`, matched case-insensitively.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.get_all(name).next()
    }

    /// Every value of `name`, matched case-insensitively.
    pub fn get_all<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a str> + 'a {
        let found = self
            .entries
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str());
        found.into_iter().flat_map(|v| v.split('\0'))
    }

    /// The pairs as they travel (names lower-case, several values NUL-joined).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// How many distinct names there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no headers.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Appends the uncompressed block to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_len(out, self.entries.len());
        for (name, value) in &self.entries {
            put_len(out, name.len());
            out.extend_from_slice(name.as_bytes());
            put_len(out, value.len());
            out.extend_from_slice(value.as_bytes());
        }
    }

    /// Parses an uncompressed block, refusing what SPDY/3 forbids. Lengths are checked against
    /// the bytes present before anything is allocated, so a hostile count costs nothing.
    pub(crate) fn decode(block: &[u8]) -> Result<Self, HeaderError> {
        let mut rest = block;
        let count = take_u32(&mut rest)? as usize;
        // Every pair needs at least two length words.
        if count > rest.len() / 8 {
            return Err(HeaderError::Truncated);
        }
        let mut headers = Headers {
            entries: Vec::with_capacity(count),
        };
        for _ in 0..count {
            let name = take_str(&mut rest)?;
            if name.is_empty() {
                return Err(HeaderError::EmptyName);
            }
            if name.bytes().any(|b| b.is_ascii_uppercase()) {
                return Err(HeaderError::UppercaseName(name.to_string()));
            }
            if headers.entries.iter().any(|(n, _)| n == name) {
                return Err(HeaderError::DuplicateName(name.to_string()));
            }
            let value = take_str(&mut rest)?;
            headers.entries.push((name.to_string(), value.to_string()));
        }
        if !rest.is_empty() {
            return Err(HeaderError::TrailingBytes(rest.len()));
        }
        Ok(headers)
    }
}

impl<N: AsRef<str>, V: Into<String>> FromIterator<(N, V)> for Headers {
    fn from_iter<I: IntoIterator<Item = (N, V)>>(iter: I) -> Self {
        let mut headers = Headers::new();
        for (name, value) in iter {
            headers.insert(name.as_ref(), value);
        }
        headers
    }
}

fn put_len(out: &mut Vec<u8>, len: usize) {
    // Header blocks are far below 4 GiB: control frames are capped at 16 MiB.
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
}

fn take_u32(rest: &mut &[u8]) -> Result<u32, HeaderError> {
    let (head, tail) = rest.split_at_checked(4).ok_or(HeaderError::Truncated)?;
    *rest = tail;
    Ok(u32::from_be_bytes([head[0], head[1], head[2], head[3]]))
}

fn take_str<'a>(rest: &mut &'a [u8]) -> Result<&'a str, HeaderError> {
    let len = take_u32(rest)? as usize;
    let (head, tail) = rest.split_at_checked(len).ok_or(HeaderError::Truncated)?;
    *rest = tail;
    std::str::from_utf8(head).map_err(|_| HeaderError::NotUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_round_trips_with_lowercased_names_and_joined_values() {
        let mut headers: Headers = [("streamType", "stdout"), ("requestID", "7")]
            .into_iter()
            .collect();
        headers.append("x-multi", "a");
        headers.append("X-Multi", "b");
        let mut block = Vec::new();
        headers.encode(&mut block);
        let back = Headers::decode(&block).unwrap();
        assert_eq!(back, headers);
        assert_eq!(back.get("STREAMTYPE"), Some("stdout"));
        assert_eq!(back.get_all("x-multi").collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(
            back.iter().collect::<Vec<_>>(),
            [
                ("streamtype", "stdout"),
                ("requestid", "7"),
                ("x-multi", "a\0b")
            ]
        );
    }

    #[test]
    fn an_empty_block_is_four_zero_bytes() {
        let mut block = Vec::new();
        Headers::new().encode(&mut block);
        assert_eq!(block, [0, 0, 0, 0]);
        assert!(Headers::decode(&block).unwrap().is_empty());
    }

    #[test]
    fn malformed_blocks_are_refused() {
        let pair = |name: &[u8], value: &[u8]| {
            let mut v = (name.len() as u32).to_be_bytes().to_vec();
            v.extend_from_slice(name);
            v.extend_from_slice(&(value.len() as u32).to_be_bytes());
            v.extend_from_slice(value);
            v
        };
        let block = |count: u32, pairs: &[Vec<u8>]| {
            let mut v = count.to_be_bytes().to_vec();
            for p in pairs {
                v.extend_from_slice(p);
            }
            v
        };
        assert_eq!(Headers::decode(&[0, 0]), Err(HeaderError::Truncated));
        // A huge count with no pairs behind it allocates nothing and fails.
        assert_eq!(
            Headers::decode(&block(u32::MAX, &[])),
            Err(HeaderError::Truncated)
        );
        // A length that runs past the end.
        let mut long = block(1, &[pair(b"a", b"b")]);
        long[7] = 200;
        assert_eq!(Headers::decode(&long), Err(HeaderError::Truncated));
        assert_eq!(
            Headers::decode(&block(1, &[pair(b"", b"x")])),
            Err(HeaderError::EmptyName)
        );
        assert_eq!(
            Headers::decode(&block(1, &[pair(b"streamType", b"x")])),
            Err(HeaderError::UppercaseName("streamType".into()))
        );
        assert_eq!(
            Headers::decode(&block(2, &[pair(b"a", b"1"), pair(b"a", b"2")])),
            Err(HeaderError::DuplicateName("a".into()))
        );
        assert_eq!(
            Headers::decode(&block(1, &[pair(b"a", &[0xff])])),
            Err(HeaderError::NotUtf8)
        );
        let mut trailing = block(1, &[pair(b"a", b"1")]);
        trailing.push(9);
        assert_eq!(
            Headers::decode(&trailing),
            Err(HeaderError::TrailingBytes(1))
        );
    }
}
