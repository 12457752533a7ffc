//! The CRI log line format containerd writes: `<RFC3339Nano> <stdout|stderr> <tags> <text>`,
//! where the first tag is `P` for a partial line (the runtime split a long line, or the
//! process has not finished it yet) and `F` for the full line's last piece. A partial
//! message loses its trailing newline; a full one keeps it, so pieces concatenate back into
//! the line the process wrote.
//!
//! Timestamps are parsed leniently (any number of fractional digits, any offset) and printed
//! as upstream's `RFC3339NanoFixed` (always nine digits, UTC here as containerd writes).

use jiff::Timestamp;

/// Which stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One parsed log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message<'a> {
    pub timestamp: Timestamp,
    pub stream: Stream,
    /// The `P` tag: the line continues in the next message.
    pub partial: bool,
    /// The text, with its newline for a full line.
    pub content: &'a [u8],
}

/// Why a line is not a CRI log line (upstream's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("timestamp is not found")]
    NoTimestamp,
    #[error("unexpected timestamp format: {0}")]
    Timestamp(String),
    #[error("stream type is not found")]
    NoStream,
    #[error("unexpected stream type {0:?}")]
    Stream(String),
    #[error("log tag is not found")]
    NoTag,
}

fn split_space(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let i = s.iter().position(|b| *b == b' ')?;
    Some((&s[..i], &s[i + 1..]))
}

/// Parses one line as read from the file (with its newline, if it had one).
pub fn parse(line: &[u8]) -> Result<Message<'_>, ParseError> {
    let (ts, rest) = split_space(line).ok_or(ParseError::NoTimestamp)?;
    let ts = std::str::from_utf8(ts).map_err(|e| ParseError::Timestamp(e.to_string()))?;
    let timestamp: Timestamp = ts
        .parse()
        .map_err(|e: jiff::Error| ParseError::Timestamp(e.to_string()))?;
    let (stream, rest) = split_space(rest).ok_or(ParseError::NoStream)?;
    let stream = match stream {
        b"stdout" => Stream::Stdout,
        b"stderr" => Stream::Stderr,
        other => return Err(ParseError::Stream(String::from_utf8_lossy(other).into())),
    };
    let (tags, mut content) = split_space(rest).ok_or(ParseError::NoTag)?;
    // Tags are `:`-separated; only the first is defined (keep forward compatible).
    let partial = tags.split(|b| *b == b':').next() == Some(b"P");
    if partial && content.last() == Some(&b'\n') {
        content = &content[..content.len() - 1];
    }
    Ok(Message {
        timestamp,
        stream,
        partial,
        content,
    })
}

/// A timestamp as `RFC3339NanoFixed` (`2006-01-02T15:04:05.000000000Z`).
pub fn format_timestamp(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S.%9fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_and_partial_lines_parse_as_upstream() {
        let m = parse(b"2016-10-06T00:17:09.669794202Z stdout F log content 1\n").unwrap();
        assert_eq!(m.stream, Stream::Stdout);
        assert!(!m.partial);
        assert_eq!(m.content, b"log content 1\n");
        assert_eq!(
            format_timestamp(m.timestamp),
            "2016-10-06T00:17:09.669794202Z"
        );

        // A partial piece loses the newline the runtime added to terminate the file line.
        let m = parse(b"2016-10-06T00:17:09.669794203Z stderr P part\n").unwrap();
        assert_eq!(
            (m.stream, m.partial, m.content),
            (Stream::Stderr, true, &b"part"[..])
        );

        // Unknown extra tags are ignored; an empty message is an empty line.
        let m = parse(b"2016-10-06T00:17:09Z stdout F:x \n").unwrap();
        assert_eq!(m.content, b"\n");
        assert_eq!(
            format_timestamp(m.timestamp),
            "2016-10-06T00:17:09.000000000Z"
        );
    }

    #[test]
    fn offsets_are_normalised_to_utc_with_nine_digits() {
        let m = parse(b"2024-01-01T02:00:00.5+02:00 stdout F x\n").unwrap();
        assert_eq!(
            format_timestamp(m.timestamp),
            "2024-01-01T00:00:00.500000000Z"
        );
    }

    #[test]
    fn malformed_lines_say_what_is_missing() {
        assert_eq!(parse(b"garbage").unwrap_err(), ParseError::NoTimestamp);
        assert!(matches!(
            parse(b"yesterday stdout F x").unwrap_err(),
            ParseError::Timestamp(_)
        ));
        assert_eq!(
            parse(b"2016-10-06T00:17:09Z stdout").unwrap_err(),
            ParseError::NoStream
        );
        assert_eq!(
            parse(b"2016-10-06T00:17:09Z stdin F x").unwrap_err(),
            ParseError::Stream("stdin".into())
        );
        assert_eq!(
            parse(b"2016-10-06T00:17:09Z stdout F").unwrap_err(),
            ParseError::NoTag
        );
    }
}
