//! Header-block compression: zlib with the SPDY/3 preset dictionary (SPDY/3 §2.6.10.1).
//!
//! Each direction of a connection has one compression context for its whole life: every
//! header block is compressed into it and ended with a sync flush, and the receiver inflates
//! each block with its own single context. A block therefore can only be decoded in order, and
//! a decompression failure poisons the connection (not just the stream).
//!
//! The dictionary is built from its definition in the specification: sixty-six length-prefixed
//! header words, then a tail of status lines, dates and content types. Its Adler-32 (which the
//! zlib header names) is `0xe3c6a7c2`, checked by a test.

use std::sync::LazyLock;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use thiserror::Error;

/// Failures of the compression contexts. All of them end the connection.
#[derive(Debug, Error)]
pub enum ZlibError {
    /// The peer's header block is not valid zlib data for this context.
    #[error("header block does not decompress: {0}")]
    Corrupt(String),
    /// The peer's stream asks for a dictionary other than SPDY/3's.
    #[error("header block names an unknown dictionary {0:#010x}")]
    UnknownDictionary(u32),
    /// The header block inflates past the configured limit (a decompression bomb).
    #[error("header block inflates past {0} bytes")]
    TooLarge(usize),
    /// The peer ended its zlib stream, after which no further block could be read.
    #[error("header compression stream ended early")]
    StreamEnded,
    /// Our own compressor failed (it does not, short of a bug in the zlib backend).
    #[error("header compression failed: {0}")]
    Compress(String),
}

/// The words of the dictionary's first part; each goes in as a 32-bit length and the word.
const WORDS: [&str; 66] = [
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
    // The last word runs straight into the tail below.
    "",
];

/// The dictionary's raw tail, concatenated without separators.
const TAIL: [&str; 9] = [
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505",
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request",
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented",
    "503 Service Unavailable",
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 ",
    "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT",
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,",
    "text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdch",
    "charset=utf-8charset=iso-8859-1,utf-,*,enq=0.",
];

/// The SPDY/3 header dictionary.
pub static DICTIONARY: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let mut dict = Vec::with_capacity(1423);
    for word in WORDS.iter().filter(|w| !w.is_empty()) {
        dict.extend_from_slice(&(word.len() as u32).to_be_bytes());
        dict.extend_from_slice(word.as_bytes());
    }
    for part in TAIL {
        dict.extend_from_slice(part.as_bytes());
    }
    dict
});

/// The sending side's context.
pub struct HeaderCompressor {
    z: Compress,
}

impl HeaderCompressor {
    /// A fresh context with the dictionary set (so the first block's zlib header names it).
    pub fn new() -> Result<Self, ZlibError> {
        let mut z = Compress::new(Compression::default(), true);
        z.set_dictionary(&DICTIONARY)
            .map_err(|e| ZlibError::Compress(e.to_string()))?;
        Ok(Self { z })
    }

    /// Compresses one block and sync-flushes it, appending to `out`.
    pub fn compress(&mut self, block: &[u8], out: &mut Vec<u8>) -> Result<(), ZlibError> {
        let start = self.z.total_in();
        loop {
            out.reserve(block.len() / 2 + 64);
            let consumed = (self.z.total_in() - start) as usize;
            self.z
                .compress_vec(&block[consumed..], out, FlushCompress::Sync)
                .map_err(|e| ZlibError::Compress(e.to_string()))?;
            let consumed = (self.z.total_in() - start) as usize;
            // The flush is complete once all input is in and the output was not filled.
            if consumed == block.len() && out.len() < out.capacity() {
                return Ok(());
            }
        }
    }
}

/// The receiving side's context.
pub struct HeaderDecompressor {
    z: Decompress,
}

impl Default for HeaderDecompressor {
    fn default() -> Self {
        Self::new()
    }
}

impl HeaderDecompressor {
    /// A fresh context; the dictionary is supplied when the stream asks for it.
    pub fn new() -> Self {
        Self {
            z: Decompress::new(true),
        }
    }

    /// Inflates one compressed block (all of `input`), refusing to produce more than `limit`
    /// bytes.
    pub fn decompress(&mut self, input: &[u8], limit: usize) -> Result<Vec<u8>, ZlibError> {
        let start = self.z.total_in();
        let mut out: Vec<u8> = Vec::with_capacity((input.len() * 4).clamp(64, limit.max(64)));
        loop {
            if out.len() == out.capacity() {
                if out.len() >= limit {
                    return Err(ZlibError::TooLarge(limit));
                }
                let more = out.capacity().min(limit - out.len()).max(64);
                out.reserve(more);
            }
            let consumed = (self.z.total_in() - start) as usize;
            let (before_in, before_out) = (self.z.total_in(), self.z.total_out());
            match self
                .z
                .decompress_vec(&input[consumed..], &mut out, FlushDecompress::Sync)
            {
                Ok(Status::StreamEnd) => return Err(ZlibError::StreamEnded),
                Ok(Status::Ok | Status::BufError) => {}
                Err(e) => match e.needs_dictionary() {
                    Some(id) if id == adler32(&DICTIONARY) => {
                        self.z
                            .set_dictionary(&DICTIONARY)
                            .map_err(|e| ZlibError::Corrupt(e.to_string()))?;
                        continue;
                    }
                    Some(id) => return Err(ZlibError::UnknownDictionary(id)),
                    None => return Err(ZlibError::Corrupt(e.to_string())),
                },
            }
            if out.len() > limit {
                return Err(ZlibError::TooLarge(limit));
            }
            let consumed = (self.z.total_in() - start) as usize;
            if consumed == input.len() && out.len() < out.capacity() {
                return Ok(out);
            }
            let progressed = self.z.total_in() != before_in || self.z.total_out() != before_out;
            if !progressed && out.len() < out.capacity() {
                return Err(ZlibError::Corrupt(
                    "no progress inflating header block".into(),
                ));
            }
        }
    }
}

/// Adler-32 as zlib computes it (the dictionary id in a zlib header).
pub fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dictionary_is_the_one_the_specification_defines() {
        assert_eq!(DICTIONARY.len(), 1423);
        assert_eq!(adler32(&DICTIONARY), 0xe3c6_a7c2);
        assert!(DICTIONARY.starts_with(b"\0\0\0\x07options\0\0\0\x04head"));
        assert!(DICTIONARY.ends_with(b",*,enq=0."));
    }

    #[test]
    fn blocks_round_trip_through_one_context_per_direction() {
        let mut tx = HeaderCompressor::new().unwrap();
        let mut rx = HeaderDecompressor::new();
        for block in [
            &b"first block"[..],
            b"streamtype\0error",
            &[7u8; 5000],
            b"x",
        ] {
            let mut wire = Vec::new();
            tx.compress(block, &mut wire).unwrap();
            // Every block ends with the sync-flush marker.
            assert!(wire.ends_with(&[0, 0, 0xff, 0xff]));
            assert_eq!(rx.decompress(&wire, 1 << 20).unwrap(), block);
        }
    }

    #[test]
    fn the_first_block_names_the_dictionary() {
        let mut tx = HeaderCompressor::new().unwrap();
        let mut wire = Vec::new();
        tx.compress(b"x", &mut wire).unwrap();
        // CMF/FLG with FDICT set, then the dictionary's Adler-32.
        assert_eq!(wire[0], 0x78);
        assert_ne!(wire[1] & 0x20, 0);
        assert_eq!(&wire[2..6], &0xe3c6_a7c2u32.to_be_bytes());
    }

    #[test]
    fn a_decompression_bomb_is_refused() {
        let mut tx = HeaderCompressor::new().unwrap();
        let mut rx = HeaderDecompressor::new();
        let mut wire = Vec::new();
        tx.compress(&vec![0u8; 1 << 20], &mut wire).unwrap();
        assert!(wire.len() < 8 << 10);
        assert!(matches!(
            rx.decompress(&wire, 64 << 10),
            Err(ZlibError::TooLarge(_))
        ));
    }

    #[test]
    fn garbage_is_refused() {
        let mut rx = HeaderDecompressor::new();
        assert!(rx.decompress(b"\x12\x34garbage", 1 << 20).is_err());
        // A zlib stream that asks for another dictionary.
        let mut rx = HeaderDecompressor::new();
        assert!(matches!(
            rx.decompress(&[0x78, 0xbb, 0, 0, 0, 1], 1 << 20),
            Err(ZlibError::UnknownDictionary(1))
        ));
    }
}
