//! One reader and one writer type over every transport a Kubernetes stream can ride on (a SPDY
//! stream half or a WebSocket channel), so protocol code and its users need not care which.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::spdy;
use crate::ws;

/// The receiving side of a stream or channel.
pub enum Reader {
    Spdy(spdy::RecvStream),
    Ws(ws::ChannelReader),
}

/// The sending side of a stream or channel. Shutting it down half-closes (SPDY FIN, v5
/// CLOSE where the channel signals it).
pub enum Writer {
    Spdy(spdy::SendStream),
    Ws(ws::ChannelWriter),
}

impl AsyncRead for Reader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Reader::Spdy(s) => Pin::new(s).poll_read(cx, buf),
            Reader::Ws(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Writer {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Writer::Spdy(s) => Pin::new(s).poll_write(cx, data),
            Writer::Ws(s) => Pin::new(s).poll_write(cx, data),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Writer::Spdy(s) => Pin::new(s).poll_flush(cx),
            Writer::Ws(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Writer::Spdy(s) => Pin::new(s).poll_shutdown(cx),
            Writer::Ws(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// Whether a read error means only that the other side is gone. Go treats a reset stream or
/// a closed connection as EOF when copying, and so must a relay.
pub fn is_end_of_stream(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::UnexpectedEof
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted
    )
}

/// Copies `from` into `to` until EOF (a reset or lost peer counts as EOF), then half-closes
/// `to`. Returns the bytes copied.
pub async fn copy_then_close<R, W>(from: &mut R, to: &mut W) -> io::Result<u64>
where
    R: AsyncRead + Unpin + ?Sized,
    W: AsyncWrite + Unpin + ?Sized,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 32 << 10];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if is_end_of_stream(&e) => break,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n]).await?;
        total += n as u64;
    }
    to.shutdown().await?;
    Ok(total)
}
