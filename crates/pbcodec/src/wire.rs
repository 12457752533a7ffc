//! The protobuf wire format: a bounds-checked reader that never panics, and a small writer.
//!
//! Kubernetes messages use only varints (bool, int32, int64), fixed64 (double) and
//! length-delimited values (strings, bytes, messages, map entries, packed scalars).

use crate::error::{Result, malformed};

/// A decoded field value as it appears on the wire.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Len(&'a [u8]),
}

/// Reads (tag, value) pairs from one message's bytes.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    path: &'a str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], path: &'a str) -> Self {
        Reader { buf, pos: 0, path }
    }

    pub(crate) fn varint(&mut self) -> Result<u64> {
        let mut value: u64 = 0;
        for shift in (0..70).step_by(7) {
            let Some(&byte) = self.buf.get(self.pos) else {
                return Err(malformed(self.path, "truncated varint"));
            };
            self.pos += 1;
            if shift == 63 && byte > 1 {
                return Err(malformed(self.path, "varint overflows 64 bits"));
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(malformed(self.path, "varint longer than 10 bytes"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.buf.len())
            .ok_or_else(|| malformed(self.path, "truncated field"))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// A little-endian 8-byte value (packed doubles).
    pub(crate) fn fixed64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    }

    /// The next field, or `None` at the end of the message.
    pub(crate) fn next_field(&mut self) -> Result<Option<(u32, Wire<'a>)>> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let tag = u32::try_from(key >> 3)
            .ok()
            .filter(|&t| t > 0 && t < (1 << 29))
            .ok_or_else(|| malformed(self.path, format!("invalid field number {}", key >> 3)))?;
        let value = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => Wire::Fixed64(self.fixed64()?),
            2 => {
                let len = usize::try_from(self.varint()?)
                    .map_err(|_| malformed(self.path, "length does not fit in memory"))?;
                Wire::Len(self.take(len)?)
            }
            5 => {
                let b = self.take(4)?;
                Wire::Fixed32(u32::from_le_bytes(b.try_into().unwrap_or([0; 4])))
            }
            other => {
                return Err(malformed(
                    self.path,
                    format!("unsupported wire type {other} for field {tag}"),
                ));
            }
        };
        Ok(Some((tag, value)))
    }

    /// Whether every byte was consumed (used for packed scalars).
    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }
}

/// Appends protobuf-encoded fields to a buffer.
#[derive(Default)]
pub(crate) struct Writer {
    pub(crate) buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn key(&mut self, tag: u32, wire_type: u8) {
        self.varint(u64::from(tag) << 3 | u64::from(wire_type));
    }

    pub(crate) fn varint_field(&mut self, tag: u32, v: u64) {
        self.key(tag, 0);
        self.varint(v);
    }

    pub(crate) fn fixed64_field(&mut self, tag: u32, v: u64) {
        self.key(tag, 1);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn bytes_field(&mut self, tag: u32, bytes: &[u8]) {
        self.key(tag, 2);
        self.varint(bytes.len() as u64);
        self.buf.extend_from_slice(bytes);
    }
}
