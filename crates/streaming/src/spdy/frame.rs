//! SPDY/3.1 frames and their wire codec.
//!
//! A frame is 8 header bytes and a payload of up to 2^24-1 bytes. Control frames start with
//! the bit set, the version (3) and a type; data frames with a 31-bit stream id. Decoding is
//! incremental over a buffer (`decode` returns `None` until a whole frame is there) and checks
//! every length before allocating, so a hostile peer costs at most one frame of memory, itself
//! capped by `Limits`. Header blocks go through the connection's zlib contexts, in wire order.
//!
//! Unknown control frame types (CREDENTIAL, SPDY/2's NOOP) are skipped, as SPDY/3 asks; Go's
//! spdystream would instead drop the connection, so we never send them.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use thiserror::Error;

use super::headers::{HeaderError, Headers};
use super::zlib::{HeaderCompressor, HeaderDecompressor, ZlibError};

/// The protocol version in every control frame.
pub const VERSION: u16 = 3;
/// The largest payload a 24-bit length can announce.
pub const MAX_PAYLOAD: usize = 0xff_ffff;

const TYPE_SYN_STREAM: u16 = 1;
const TYPE_SYN_REPLY: u16 = 2;
const TYPE_RST_STREAM: u16 = 3;
const TYPE_SETTINGS: u16 = 4;
const TYPE_PING: u16 = 6;
const TYPE_GOAWAY: u16 = 7;
const TYPE_HEADERS: u16 = 8;
const TYPE_WINDOW_UPDATE: u16 = 9;

const FLAG_FIN: u8 = 0x01;
const FLAG_UNIDIRECTIONAL: u8 = 0x02;
const FLAG_CLEAR_SETTINGS: u8 = 0x01;

/// A stream id (31 bits; client-initiated ids are odd, server-initiated even).
pub type StreamId = u32;

/// RST_STREAM status codes (SPDY/3 §2.4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RstStatus {
    ProtocolError,
    InvalidStream,
    RefusedStream,
    UnsupportedVersion,
    Cancel,
    InternalError,
    FlowControlError,
    StreamInUse,
    StreamAlreadyClosed,
    FrameTooLarge,
    /// A code this implementation does not name.
    Other(u32),
}

impl RstStatus {
    fn code(self) -> u32 {
        match self {
            RstStatus::ProtocolError => 1,
            RstStatus::InvalidStream => 2,
            RstStatus::RefusedStream => 3,
            RstStatus::UnsupportedVersion => 4,
            RstStatus::Cancel => 5,
            RstStatus::InternalError => 6,
            RstStatus::FlowControlError => 7,
            RstStatus::StreamInUse => 8,
            RstStatus::StreamAlreadyClosed => 9,
            RstStatus::FrameTooLarge => 11,
            RstStatus::Other(code) => code,
        }
    }

    fn from_code(code: u32) -> Self {
        match code {
            1 => RstStatus::ProtocolError,
            2 => RstStatus::InvalidStream,
            3 => RstStatus::RefusedStream,
            4 => RstStatus::UnsupportedVersion,
            5 => RstStatus::Cancel,
            6 => RstStatus::InternalError,
            7 => RstStatus::FlowControlError,
            8 => RstStatus::StreamInUse,
            9 => RstStatus::StreamAlreadyClosed,
            11 => RstStatus::FrameTooLarge,
            other => RstStatus::Other(other),
        }
    }
}

/// GOAWAY status codes (SPDY/3 §2.6.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoAwayStatus {
    Ok,
    ProtocolError,
    InternalError,
    Other(u32),
}

impl GoAwayStatus {
    fn code(self) -> u32 {
        match self {
            GoAwayStatus::Ok => 0,
            GoAwayStatus::ProtocolError => 1,
            GoAwayStatus::InternalError => 2,
            GoAwayStatus::Other(code) => code,
        }
    }

    fn from_code(code: u32) -> Self {
        match code {
            0 => GoAwayStatus::Ok,
            1 => GoAwayStatus::ProtocolError,
            2 => GoAwayStatus::InternalError,
            other => GoAwayStatus::Other(other),
        }
    }
}

/// SETTINGS ids this implementation acts on.
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u32 = 4;
/// The initial stream window (SPDY/3.1 §2.6.8).
pub const SETTINGS_INITIAL_WINDOW_SIZE: u32 = 7;

/// One SETTINGS entry: flags (8 bits), id (24 bits), value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setting {
    pub flags: u8,
    pub id: u32,
    pub value: u32,
}

/// A decoded frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    SynStream {
        stream_id: StreamId,
        associated_to: StreamId,
        priority: u8,
        fin: bool,
        unidirectional: bool,
        headers: Headers,
    },
    SynReply {
        stream_id: StreamId,
        fin: bool,
        headers: Headers,
    },
    RstStream {
        stream_id: StreamId,
        status: RstStatus,
    },
    Settings {
        clear: bool,
        entries: Vec<Setting>,
    },
    Ping {
        id: u32,
    },
    GoAway {
        last_good_stream_id: StreamId,
        status: GoAwayStatus,
    },
    Headers {
        stream_id: StreamId,
        fin: bool,
        headers: Headers,
    },
    WindowUpdate {
        stream_id: StreamId,
        delta: u32,
    },
    Data {
        stream_id: StreamId,
        fin: bool,
        data: Bytes,
    },
    /// A control frame of a type SPDY/3.1 does not define for us; skipped.
    Unknown {
        frame_type: u16,
    },
}

/// How much a peer may make the decoder hold.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest control frame payload accepted.
    pub max_control_payload: usize,
    /// Largest data frame payload accepted.
    pub max_data_payload: usize,
    /// Largest inflated header block.
    pub max_header_block: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            // Kubernetes' header blocks are a few dozen bytes; 1 MiB is generous.
            max_control_payload: 1 << 20,
            // Go's spdystream writes one frame per Write call, up to the protocol maximum.
            max_data_payload: MAX_PAYLOAD,
            max_header_block: 1 << 20,
        }
    }
}

/// Why decoding failed.
#[derive(Debug, Error)]
pub enum FrameError {
    /// A session error: the connection must end (GOAWAY PROTOCOL_ERROR).
    #[error("malformed frame: {0}")]
    Malformed(&'static str),
    /// A control frame of another SPDY version.
    #[error("unsupported SPDY version {0}")]
    UnsupportedVersion(u16),
    /// A frame larger than `Limits` allows.
    #[error("frame of {0} bytes exceeds the limit of {1}")]
    TooLarge(usize, usize),
    /// The header compression context failed; the connection cannot continue.
    #[error(transparent)]
    Zlib(#[from] ZlibError),
    /// A header block decompressed but is invalid: a stream error (RST_STREAM
    /// PROTOCOL_ERROR on `stream_id`); the connection continues.
    #[error("invalid header block on stream {stream_id}: {source}")]
    Headers {
        stream_id: StreamId,
        #[source]
        source: HeaderError,
    },
}

/// Decodes the next frame from `buf`, consuming it; `Ok(None)` when more bytes are needed.
pub fn decode(
    buf: &mut BytesMut,
    inflate: &mut HeaderDecompressor,
    limits: &Limits,
) -> Result<Option<Frame>, FrameError> {
    if buf.len() < 8 {
        return Ok(None);
    }
    let first = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    let flags = buf[4];
    let len = (usize::from(buf[5]) << 16) | (usize::from(buf[6]) << 8) | usize::from(buf[7]);
    let control = first & 0x8000_0000 != 0;
    let max = if control {
        limits.max_control_payload
    } else {
        limits.max_data_payload
    };
    if len > max {
        return Err(FrameError::TooLarge(len, max));
    }
    if buf.len() < 8 + len {
        buf.reserve(8 + len - buf.len());
        return Ok(None);
    }
    buf.advance(8);
    let mut payload = buf.split_to(len).freeze();
    if !control {
        let stream_id = first & 0x7fff_ffff;
        if stream_id == 0 {
            return Err(FrameError::Malformed("data frame on stream 0"));
        }
        return Ok(Some(Frame::Data {
            stream_id,
            fin: flags & FLAG_FIN != 0,
            data: payload,
        }));
    }
    let version = ((first >> 16) & 0x7fff) as u16;
    if version != VERSION {
        return Err(FrameError::UnsupportedVersion(version));
    }
    let frame_type = (first & 0xffff) as u16;
    let fin = flags & FLAG_FIN != 0;
    let frame = match frame_type {
        TYPE_SYN_STREAM => {
            if len < 10 {
                return Err(FrameError::Malformed("short SYN_STREAM"));
            }
            let stream_id = payload.get_u32() & 0x7fff_ffff;
            let associated_to = payload.get_u32() & 0x7fff_ffff;
            let priority = payload.get_u8() >> 5;
            let _slot = payload.get_u8();
            let headers = header_block(inflate, &payload, stream_id, limits)?;
            non_zero(stream_id, "SYN_STREAM on stream 0")?;
            Frame::SynStream {
                stream_id,
                associated_to,
                priority,
                fin,
                unidirectional: flags & FLAG_UNIDIRECTIONAL != 0,
                headers,
            }
        }
        TYPE_SYN_REPLY | TYPE_HEADERS => {
            if len < 4 {
                return Err(FrameError::Malformed("short SYN_REPLY or HEADERS"));
            }
            let stream_id = payload.get_u32() & 0x7fff_ffff;
            let headers = header_block(inflate, &payload, stream_id, limits)?;
            non_zero(stream_id, "SYN_REPLY or HEADERS on stream 0")?;
            if frame_type == TYPE_SYN_REPLY {
                Frame::SynReply {
                    stream_id,
                    fin,
                    headers,
                }
            } else {
                Frame::Headers {
                    stream_id,
                    fin,
                    headers,
                }
            }
        }
        TYPE_RST_STREAM => {
            if len != 8 {
                return Err(FrameError::Malformed("RST_STREAM length is not 8"));
            }
            let stream_id = payload.get_u32() & 0x7fff_ffff;
            let code = payload.get_u32();
            non_zero(stream_id, "RST_STREAM on stream 0")?;
            if code == 0 {
                return Err(FrameError::Malformed("RST_STREAM with status 0"));
            }
            Frame::RstStream {
                stream_id,
                status: RstStatus::from_code(code),
            }
        }
        TYPE_SETTINGS => {
            if len < 4 {
                return Err(FrameError::Malformed("short SETTINGS"));
            }
            let count = payload.get_u32() as usize;
            if count.checked_mul(8) != Some(payload.len()) {
                return Err(FrameError::Malformed(
                    "SETTINGS count does not match length",
                ));
            }
            let entries = (0..count)
                .map(|_| {
                    let flags_id = payload.get_u32();
                    Setting {
                        flags: (flags_id >> 24) as u8,
                        id: flags_id & 0xff_ffff,
                        value: payload.get_u32(),
                    }
                })
                .collect();
            Frame::Settings {
                clear: flags & FLAG_CLEAR_SETTINGS != 0,
                entries,
            }
        }
        TYPE_PING => {
            if len != 4 {
                return Err(FrameError::Malformed("PING length is not 4"));
            }
            Frame::Ping {
                id: payload.get_u32(),
            }
        }
        TYPE_GOAWAY => {
            if len != 8 {
                return Err(FrameError::Malformed("GOAWAY length is not 8"));
            }
            Frame::GoAway {
                last_good_stream_id: payload.get_u32() & 0x7fff_ffff,
                status: GoAwayStatus::from_code(payload.get_u32()),
            }
        }
        TYPE_WINDOW_UPDATE => {
            if len != 8 {
                return Err(FrameError::Malformed("WINDOW_UPDATE length is not 8"));
            }
            Frame::WindowUpdate {
                stream_id: payload.get_u32() & 0x7fff_ffff,
                delta: payload.get_u32() & 0x7fff_ffff,
            }
        }
        other => Frame::Unknown { frame_type: other },
    };
    Ok(Some(frame))
}

fn non_zero(stream_id: StreamId, what: &'static str) -> Result<(), FrameError> {
    if stream_id == 0 {
        Err(FrameError::Malformed(what))
    } else {
        Ok(())
    }
}

fn header_block(
    inflate: &mut HeaderDecompressor,
    compressed: &[u8],
    stream_id: StreamId,
    limits: &Limits,
) -> Result<Headers, FrameError> {
    // Inflate first, whatever else is wrong, so the context stays in step with the peer's.
    let block = inflate.decompress(compressed, limits.max_header_block)?;
    Headers::decode(&block).map_err(|source| FrameError::Headers { stream_id, source })
}

/// Appends the wire form of `frame` to `out`. Header blocks are compressed with `deflate`, so
/// frames must be encoded in the order they are written.
pub fn encode(
    frame: &Frame,
    deflate: &mut HeaderCompressor,
    out: &mut BytesMut,
) -> Result<(), ZlibError> {
    match frame {
        Frame::SynStream {
            stream_id,
            associated_to,
            priority,
            fin,
            unidirectional,
            headers,
        } => {
            let block = compress(deflate, headers)?;
            let flags = flag(*fin, FLAG_FIN) | flag(*unidirectional, FLAG_UNIDIRECTIONAL);
            control_header(out, TYPE_SYN_STREAM, flags, 10 + block.len());
            out.put_u32(*stream_id & 0x7fff_ffff);
            out.put_u32(*associated_to & 0x7fff_ffff);
            out.put_u8((priority & 0x7) << 5);
            out.put_u8(0);
            out.put_slice(&block);
        }
        Frame::SynReply {
            stream_id,
            fin,
            headers,
        }
        | Frame::Headers {
            stream_id,
            fin,
            headers,
        } => {
            let block = compress(deflate, headers)?;
            let ty = if matches!(frame, Frame::SynReply { .. }) {
                TYPE_SYN_REPLY
            } else {
                TYPE_HEADERS
            };
            control_header(out, ty, flag(*fin, FLAG_FIN), 4 + block.len());
            out.put_u32(*stream_id & 0x7fff_ffff);
            out.put_slice(&block);
        }
        Frame::RstStream { stream_id, status } => {
            control_header(out, TYPE_RST_STREAM, 0, 8);
            out.put_u32(*stream_id & 0x7fff_ffff);
            out.put_u32(status.code());
        }
        Frame::Settings { clear, entries } => {
            control_header(
                out,
                TYPE_SETTINGS,
                flag(*clear, FLAG_CLEAR_SETTINGS),
                4 + 8 * entries.len(),
            );
            out.put_u32(entries.len() as u32);
            for e in entries {
                out.put_u32((u32::from(e.flags) << 24) | (e.id & 0xff_ffff));
                out.put_u32(e.value);
            }
        }
        Frame::Ping { id } => {
            control_header(out, TYPE_PING, 0, 4);
            out.put_u32(*id);
        }
        Frame::GoAway {
            last_good_stream_id,
            status,
        } => {
            control_header(out, TYPE_GOAWAY, 0, 8);
            out.put_u32(*last_good_stream_id & 0x7fff_ffff);
            out.put_u32(status.code());
        }
        Frame::WindowUpdate { stream_id, delta } => {
            control_header(out, TYPE_WINDOW_UPDATE, 0, 8);
            out.put_u32(*stream_id & 0x7fff_ffff);
            out.put_u32(*delta & 0x7fff_ffff);
        }
        Frame::Data {
            stream_id,
            fin,
            data,
        } => {
            out.put_u32(*stream_id & 0x7fff_ffff);
            out.put_u32((u32::from(flag(*fin, FLAG_FIN)) << 24) | (data.len() as u32 & 0xff_ffff));
            out.put_slice(data);
        }
        // Never sent: Go's framer would drop the connection on it.
        Frame::Unknown { .. } => {}
    }
    Ok(())
}

fn compress(deflate: &mut HeaderCompressor, headers: &Headers) -> Result<Vec<u8>, ZlibError> {
    let mut block = Vec::new();
    headers.encode(&mut block);
    let mut compressed = Vec::new();
    deflate.compress(&block, &mut compressed)?;
    Ok(compressed)
}

fn flag(on: bool, bit: u8) -> u8 {
    if on { bit } else { 0 }
}

fn control_header(out: &mut BytesMut, frame_type: u16, flags: u8, len: usize) {
    out.put_u16(0x8000 | VERSION);
    out.put_u16(frame_type);
    out.put_u32((u32::from(flags) << 24) | (len as u32 & 0xff_ffff));
}
