//! Codec tests: every frame type round-trips, header blocks from an independent zlib decode,
//! and malformed or oversized frames are refused before they cost memory.

use bytes::{BufMut, Bytes, BytesMut};

use super::frame::{self, Frame, FrameError, GoAwayStatus, Limits, RstStatus, Setting};
use super::headers::Headers;
use super::zlib::{HeaderCompressor, HeaderDecompressor};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn headers(pairs: &[(&str, &str)]) -> Headers {
    pairs.iter().copied().collect()
}

fn decode_all(wire: &[u8]) -> Result<Vec<Frame>, FrameError> {
    let mut rx = HeaderDecompressor::new();
    let mut buf = BytesMut::from(wire);
    let mut frames = Vec::new();
    while let Some(frame) = frame::decode(&mut buf, &mut rx, &Limits::default())? {
        frames.push(frame);
    }
    assert!(buf.is_empty(), "{} bytes left undecoded", buf.len());
    Ok(frames)
}

#[test]
fn every_frame_type_round_trips_in_order() {
    let frames = vec![
        Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 0,
            fin: false,
            unidirectional: false,
            headers: headers(&[("streamtype", "error")]),
        },
        Frame::SynStream {
            stream_id: 3,
            associated_to: 1,
            priority: 7,
            fin: true,
            unidirectional: true,
            headers: headers(&[("streamtype", "stdin"), ("x", "a\0b")]),
        },
        Frame::SynReply {
            stream_id: 1,
            fin: false,
            headers: Headers::new(),
        },
        Frame::Headers {
            stream_id: 3,
            fin: true,
            headers: headers(&[("trailer", "yes")]),
        },
        Frame::RstStream {
            stream_id: 5,
            status: RstStatus::Cancel,
        },
        Frame::RstStream {
            stream_id: 5,
            status: RstStatus::Other(99),
        },
        Frame::Settings {
            clear: true,
            entries: vec![Setting {
                flags: 1,
                id: 7,
                value: 1 << 20,
            }],
        },
        Frame::Ping { id: 2 },
        Frame::GoAway {
            last_good_stream_id: 7,
            status: GoAwayStatus::Ok,
        },
        Frame::WindowUpdate {
            stream_id: 0,
            delta: 0x7fff_ffff,
        },
        Frame::Data {
            stream_id: 1,
            fin: false,
            data: Bytes::from_static(b"hello"),
        },
        Frame::Data {
            stream_id: 1,
            fin: true,
            data: Bytes::new(),
        },
    ];
    let mut tx = HeaderCompressor::new().unwrap();
    let mut wire = BytesMut::new();
    for f in &frames {
        frame::encode(f, &mut tx, &mut wire).unwrap();
    }
    assert_eq!(decode_all(&wire).unwrap(), frames);
}

#[test]
fn fixed_frames_have_their_specified_bytes() {
    let mut tx = HeaderCompressor::new().unwrap();
    let mut wire = BytesMut::new();
    frame::encode(&Frame::Ping { id: 1 }, &mut tx, &mut wire).unwrap();
    frame::encode(
        &Frame::RstStream {
            stream_id: 3,
            status: RstStatus::Cancel,
        },
        &mut tx,
        &mut wire,
    )
    .unwrap();
    frame::encode(
        &Frame::Data {
            stream_id: 5,
            fin: true,
            data: Bytes::from_static(b"ab"),
        },
        &mut tx,
        &mut wire,
    )
    .unwrap();
    assert_eq!(
        &wire[..],
        &hex(concat!(
            "8003000600000004",
            "00000001", // PING 1
            "8003000300000008",
            "00000003",
            "00000005", // RST_STREAM 3 CANCEL
            "00000005",
            "01000002",
            "6162", // DATA 5 FIN "ab"
        ))[..]
    );
}

/// A SYN_STREAM pair whose header blocks were compressed by C zlib (level 9, the SPDY/3
/// dictionary, one sync flush per block: what Go's framer does), as kubectl's port-forward
/// error and data streams would carry them.
#[test]
fn header_blocks_compressed_by_another_zlib_decode() {
    let z1 = hex(
        "78f9e3c6a7c202253a703a2b294a4dcc851625aca9a0808614cb45e01c6061606100a4398b20d198094ade8c0600000000ffff",
    );
    let z2 = hex("c2aa19540e2512d60b000000ffff");
    let mut wire = BytesMut::new();
    for (id, z) in [(1u32, &z1), (3, &z2)] {
        wire.put_u32(0x8003_0001);
        wire.put_u32(10 + z.len() as u32);
        wire.put_u32(id);
        wire.put_u32(0);
        wire.put_u16(0);
        wire.put_slice(z);
    }
    let frames = decode_all(&wire).unwrap();
    let expect = |stream_id, ty| Frame::SynStream {
        stream_id,
        associated_to: 0,
        priority: 0,
        fin: false,
        unidirectional: false,
        headers: headers(&[("streamtype", ty), ("port", "8080"), ("requestid", "0")]),
    };
    assert_eq!(frames, vec![expect(1, "error"), expect(3, "data")]);
}

#[test]
fn partial_frames_wait_for_more_bytes() {
    let mut tx = HeaderCompressor::new().unwrap();
    let mut wire = BytesMut::new();
    frame::encode(
        &Frame::Data {
            stream_id: 1,
            fin: false,
            data: Bytes::from_static(b"0123456789"),
        },
        &mut tx,
        &mut wire,
    )
    .unwrap();
    let mut rx = HeaderDecompressor::new();
    let mut buf = BytesMut::new();
    for (i, byte) in wire.iter().enumerate() {
        buf.put_u8(*byte);
        let got = frame::decode(&mut buf, &mut rx, &Limits::default()).unwrap();
        assert_eq!(got.is_some(), i == wire.len() - 1, "at byte {i}");
    }
}

#[test]
fn malformed_frames_are_refused() {
    let control = |ty: u16, flags: u8, payload: &[u8]| {
        let mut v = vec![0x80, 0x03];
        v.extend_from_slice(&ty.to_be_bytes());
        v.push(flags);
        v.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
        v.extend_from_slice(payload);
        v
    };
    let malformed = |wire: Vec<u8>| match decode_all(&wire) {
        Err(FrameError::Malformed(_)) => {}
        other => panic!("{wire:02x?} decoded as {other:?}"),
    };
    malformed(control(3, 0, &[0, 0, 0, 1]));
    malformed(control(3, 0, &[0, 0, 0, 1, 0, 0, 0, 0]));
    malformed(control(3, 0, &[0, 0, 0, 0, 0, 0, 0, 5]));
    malformed(control(6, 0, &[0, 0, 0, 1, 0]));
    malformed(control(7, 0, &[0, 0, 0, 1]));
    malformed(control(9, 0, &[0, 0, 0, 1, 0, 0, 0]));
    malformed(control(4, 0, &[0, 0, 0, 2, 0, 0, 0, 7, 0, 0, 0, 1]));
    malformed(control(1, 0, &[0, 0, 0, 1]));
    malformed(control(2, 0, &[0, 0]));
    malformed(vec![0, 0, 0, 0, 0, 0, 0, 0]);
    // Another SPDY version.
    let mut v2 = control(6, 0, &[0, 0, 0, 1]);
    v2[1] = 2;
    assert!(matches!(
        decode_all(&v2),
        Err(FrameError::UnsupportedVersion(2))
    ));
    // A header block that is not zlib is a connection error.
    assert!(matches!(
        decode_all(&control(2, 0, &[0, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef])),
        Err(FrameError::Zlib(_))
    ));
}

#[test]
fn an_invalid_header_block_is_a_stream_error() {
    let mut tx = HeaderCompressor::new().unwrap();
    let mut compressed = Vec::new();
    // One pair announced, none present.
    tx.compress(&[0, 0, 0, 1], &mut compressed).unwrap();
    let mut wire = BytesMut::new();
    wire.put_u32(0x8003_0002);
    wire.put_u32(4 + compressed.len() as u32);
    wire.put_u32(9);
    wire.put_slice(&compressed);
    assert!(matches!(
        decode_all(&wire),
        Err(FrameError::Headers { stream_id: 9, .. })
    ));
}

#[test]
fn oversized_frames_are_refused_from_their_header_alone() {
    let limits = Limits {
        max_control_payload: 64,
        max_data_payload: 1024,
        max_header_block: 64,
    };
    let mut rx = HeaderDecompressor::new();
    // Only the 8 header bytes of a 16 MiB data frame have arrived.
    let mut buf = BytesMut::from(&[0, 0, 0, 1, 0, 0xff, 0xff, 0xff][..]);
    assert!(matches!(
        frame::decode(&mut buf, &mut rx, &limits),
        Err(FrameError::TooLarge(0xff_ffff, 1024))
    ));
    let mut buf = BytesMut::from(&[0x80, 3, 0, 1, 0, 0, 1, 0][..]);
    assert!(matches!(
        frame::decode(&mut buf, &mut rx, &limits),
        Err(FrameError::TooLarge(256, 64))
    ));
}

#[test]
fn unknown_control_frames_are_skipped() {
    // CREDENTIAL (type 10) and SPDY/2's NOOP (type 5), then a PING.
    let mut wire = vec![
        0x80, 3, 0, 10, 0, 0, 0, 3, 1, 2, 3, 0x80, 3, 0, 5, 0, 0, 0, 0,
    ];
    wire.extend_from_slice(&[0x80, 3, 0, 6, 0, 0, 0, 4, 0, 0, 0, 9]);
    assert_eq!(
        decode_all(&wire).unwrap(),
        vec![
            Frame::Unknown { frame_type: 10 },
            Frame::Unknown { frame_type: 5 },
            Frame::Ping { id: 9 }
        ]
    );
}
