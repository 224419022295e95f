//! A connection's byte stream and message loop.
//!
//! pgwire (0.42.1) decodes a message body from the whole read buffer,
//! not from the frame its length delimits: a count that lies (a Parse
//! declaring more parameter types than its body holds, a Bind whose
//! value lengths overrun it) makes it read the next message's bytes as
//! this one's, or panic when the buffer runs out. `tests/wire_no_panic.rs`
//! found this. So every frame passes through [`FrameGuard`] first, which
//! checks that each body is exactly what its type and counts say, and
//! that it is no larger than [`MAX_MESSAGE`]; pgwire only ever sees
//! frames that are whole and consistent. A frame that is not ends the
//! connection with FATAL 08P01 naming what was wrong, as PostgreSQL ends
//! one whose protocol synchronization is lost.
//!
//! [`serve`] is pgwire's `process_socket` over the guarded stream, for a
//! server without TLS: SSL and GSSAPI requests are refused (`N`), the
//! startup must finish within [`STARTUP_TIMEOUT`], then each message goes
//! to pgwire's `process_message` and errors to `process_error`.
//!
//! Output is corked ([`FrameGuard::set_cork`]) so that a pipeline's
//! answers leave in one write, as PostgreSQL's do (pgwire flushes after
//! BindComplete and NoData; each flush was a loopback send and a wakeup
//! of the client, three per sysbench UPDATE). Two rules:
//! * CORK.1: the answer to a Parse, Bind, Describe, Execute or Close is
//!   held while another whole message from the client is already
//!   buffered (it will be handled without waiting for the client).
//! * CORK.2: before the loop reads with nothing buffered (so may wait
//!   for the client), nothing is held: it uncorks and flushes. So a
//!   client never waits for output the server holds, whatever it sends,
//!   and a held answer is at most [`CORK_LIMIT`] bytes.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use futures::{SinkExt, StreamExt};
use pgwire::api::{
    ClientInfo, DefaultClient, ErrorHandler, PgWireConnectionState, PgWireServerHandlers,
};
use pgwire::error::{ErrorInfo, PgWireError};
use pgwire::messages::response::{GssEncResponse, SslResponse};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage, SslNegotiationMetaMessage};
use pgwire::tokio::server::{PgWireMessageServerCodec, process_error, process_message};
use quill_sql::SqlState;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

/// The largest message a client may send: 64 MiB. Statements (16 MiB)
/// and a Bind's parameters (16 MiB) have lower limits of their own;
/// this one bounds what a connection buffers before either is checked.
pub const MAX_MESSAGE: usize = 64 << 20;

/// The most output a corked connection holds back ([`FrameGuard::set_cork`]);
/// past it, writes go through.
pub const CORK_LIMIT: usize = 64 << 10;

/// PostgreSQL's limit for the untyped startup-phase packets.
const MAX_STARTUP_PACKET: usize = 10_000;

/// A client must finish startup (and authentication) within this.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

const SSL_REQUEST: i32 = 80_877_103;
const GSSENC_REQUEST: i32 = 80_877_104;
const CANCEL_REQUEST: i32 = 80_877_102;

/// The error a bad frame reads as: the connection ends with FATAL 08P01.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct BadFrame(String);

/// Where the stream stands.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// Untyped packets: SSL/GSSAPI requests, then the startup packet or
    /// a cancel request.
    Startup,
    /// Typed messages.
    Messages,
    /// A cancel request passed: nothing more is read.
    Done,
}

/// A stream that passes on only whole, consistent frames (module docs).
pub struct FrameGuard<S> {
    inner: S,
    phase: Phase,
    /// Bytes read from `inner` and not yet handed to the reader: the
    /// first `checked` are whole, checked frames; the rest is the start
    /// of a frame still arriving.
    pending: BytesMut,
    checked: usize,
    /// A bad frame was seen: every later read fails with this.
    failed: Option<String>,
    /// Output held back while corked (see [`FrameGuard::set_cork`]).
    held: BytesMut,
    corked: bool,
}

impl<S> FrameGuard<S> {
    /// Guard `inner`, which starts in the startup phase.
    pub fn new(inner: S) -> FrameGuard<S> {
        FrameGuard {
            inner,
            phase: Phase::Startup,
            pending: BytesMut::new(),
            checked: 0,
            failed: None,
            held: BytesMut::new(),
            corked: false,
        }
    }

    /// Hold back output (writes and flushes succeed without reaching the
    /// socket, up to [`CORK_LIMIT`] bytes) until uncorked and flushed.
    /// The message loop corks while the client has pipelined more
    /// messages than the one being handled, so a Bind, Describe and
    /// Execute answered before their Sync go out in one write with it,
    /// as PostgreSQL sends them (it flushes at ReadyForQuery), instead of
    /// one loopback send, and one wakeup of the client, each.
    pub fn set_cork(&mut self, corked: bool) {
        self.corked = corked;
    }

    /// Whether whole frames read from the socket wait to be handed on.
    fn has_checked_frames(&self) -> bool {
        self.checked > 0
    }

    /// Count every complete frame after the checked prefix of `pending`
    /// into it, or fail on the first bad one.
    fn check_pending(&mut self) -> Result<(), String> {
        loop {
            let rest = &self.pending[self.checked..];
            match self.phase {
                Phase::Done => {
                    // Nothing after a cancel request is read.
                    self.pending.truncate(self.checked);
                    return Ok(());
                }
                Phase::Startup => {
                    if rest.first() == Some(&0x16) {
                        return Err("a TLS handshake, but this server has no TLS".into());
                    }
                    if rest.len() < 4 {
                        return Ok(());
                    }
                    let len = i32::from_be_bytes(rest[..4].try_into().expect("4 bytes"));
                    let len = usize::try_from(len).unwrap_or(0);
                    if !(8..=MAX_STARTUP_PACKET).contains(&len) {
                        return Err(format!("invalid startup packet length {len}"));
                    }
                    if rest.len() < len {
                        return Ok(());
                    }
                    let code = i32::from_be_bytes(rest[4..8].try_into().expect("4 bytes"));
                    let body = &rest[8..len];
                    match code {
                        SSL_REQUEST | GSSENC_REQUEST if body.is_empty() => {}
                        CANCEL_REQUEST if (4..=260).contains(&body.len()) => {
                            self.phase = Phase::Done;
                        }
                        c if c >> 16 == 3 => {
                            check_startup_params(body)?;
                            self.phase = Phase::Messages;
                        }
                        c => {
                            return Err(format!(
                                "unsupported frontend protocol or request code {}.{}",
                                c >> 16,
                                c & 0xffff
                            ));
                        }
                    }
                    self.checked += len;
                }
                Phase::Messages => {
                    if rest.len() < 5 {
                        return Ok(());
                    }
                    let kind = rest[0];
                    let len = i32::from_be_bytes(rest[1..5].try_into().expect("4 bytes"));
                    let len = usize::try_from(len)
                        .ok()
                        .filter(|&l| l >= 4)
                        .ok_or_else(|| format!("invalid message length {len}"))?;
                    if len > MAX_MESSAGE {
                        return Err(format!(
                            "a message of {len} bytes is larger than this server accepts ({} MiB)",
                            MAX_MESSAGE >> 20
                        ));
                    }
                    if rest.len() < 1 + len {
                        // The buffer grows as the bytes come, not by what
                        // the header claims.
                        return Ok(());
                    }
                    check_body(kind, &rest[5..1 + len])?;
                    self.checked += 1 + len;
                }
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for FrameGuard<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.checked > 0 {
                let n = this.checked.min(out.remaining());
                out.put_slice(&this.pending[..n]);
                this.pending.advance(n);
                this.checked -= n;
                return Poll::Ready(Ok(()));
            }
            if let Some(why) = &this.failed {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    BadFrame(why.clone()),
                )));
            }
            if this.pending.capacity() - this.pending.len() < 1024 {
                this.pending.reserve(8192);
            }
            let n = ready!(tokio_util::io::poll_read_buf(
                Pin::new(&mut this.inner),
                cx,
                &mut this.pending
            ))?;
            if n == 0 {
                // End of stream; an incomplete frame is dropped with it.
                return Poll::Ready(Ok(()));
            }
            if let Err(why) = this.check_pending() {
                this.failed = Some(why);
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> FrameGuard<S> {
    /// Write out everything held back.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.held.is_empty() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.held))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.held.advance(n);
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for FrameGuard<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        // Corked, or uncorked with output held: held (the flush that
        // follows every write writes it all in one go).
        if (this.corked || !this.held.is_empty()) && this.held.len() + buf.len() <= CORK_LIMIT {
            this.held.extend_from_slice(buf);
            return Poll::Ready(Ok(buf.len()));
        }
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.corked {
            return Poll::Ready(Ok(()));
        }
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }

    // Not vectored: tokio-util then writes its one buffer with write(2),
    // cheaper for these small replies than building an iovec array for
    // writev (measured: ~400 instructions per point select).
}

/// A reader over one message body that fails instead of running past it.
struct Body<'a>(&'a [u8]);

impl<'a> Body<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err(format!("{what}: the message ends early"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn cstring(&mut self, what: &str) -> Result<(), String> {
        let end = self
            .0
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| format!("{what}: no terminating zero byte"))?;
        self.0 = &self.0[end + 1..];
        Ok(())
    }

    fn i16(&mut self, what: &str) -> Result<i16, String> {
        let b = self.take(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self, what: &str) -> Result<i32, String> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn count(&mut self, what: &str) -> Result<usize, String> {
        let n = self.i16(what)?;
        usize::try_from(n).map_err(|_| format!("{what}: negative count {n}"))
    }

    fn end(&self, kind: u8) -> Result<(), String> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} bytes left over at the end of a '{}' message",
                self.0.len(),
                kind.escape_ascii()
            ))
        }
    }
}

/// The startup packet's parameters: name/value strings, then a zero.
fn check_startup_params(body: &[u8]) -> Result<(), String> {
    let mut b = Body(body);
    loop {
        match b.0 {
            [0] => return Ok(()),
            [] => return Err("startup packet: no terminating zero byte".into()),
            // An empty name ends the list (pgwire stops reading there and
            // would take the rest of the packet for messages): it must be
            // the last byte, as PostgreSQL requires.
            [0, ..] => {
                return Err(
                    "invalid startup packet layout: expected terminator as last byte".into(),
                );
            }
            _ => {
                b.cstring("startup parameter name")?;
                b.cstring("startup parameter value")?;
            }
        }
    }
}

/// Whether a typed message's body is exactly what its type says.
fn check_body(kind: u8, body: &[u8]) -> Result<(), String> {
    let mut b = Body(body);
    match kind {
        b'Q' | b'f' => b.cstring("the query string")?,
        b'P' => {
            b.cstring("Parse: the statement name")?;
            b.cstring("Parse: the query string")?;
            let n = b.count("Parse: the parameter type count")?;
            b.take(4 * n, "Parse: the parameter types")?;
        }
        b'B' => {
            b.cstring("Bind: the portal name")?;
            b.cstring("Bind: the statement name")?;
            let n = b.count("Bind: the parameter format count")?;
            b.take(2 * n, "Bind: the parameter formats")?;
            let n = b.count("Bind: the parameter count")?;
            for _ in 0..n {
                let len = b.i32("Bind: a parameter's length")?;
                if len >= 0 {
                    b.take(len as usize, "Bind: a parameter's value")?;
                } else if len != -1 {
                    return Err(format!("Bind: invalid parameter length {len}"));
                }
            }
            let n = b.count("Bind: the result format count")?;
            b.take(2 * n, "Bind: the result formats")?;
        }
        b'D' | b'C' => {
            let what = b.take(1, "Describe/Close: the kind")?[0];
            if what != b'S' && what != b'P' {
                return Err(format!(
                    "Describe/Close of '{}': expected 'S' or 'P'",
                    what.escape_ascii()
                ));
            }
            b.cstring("Describe/Close: the name")?;
        }
        b'E' => {
            b.cstring("Execute: the portal name")?;
            b.i32("Execute: the row limit")?;
        }
        b'S' | b'H' | b'X' | b'c' => {}
        // CopyData and the password family are opaque here (the startup
        // handler checks a SASL body itself).
        b'd' | b'p' => return Ok(()),
        other => {
            return Err(format!(
                "invalid frontend message type '{}'",
                other.escape_ascii()
            ));
        }
    }
    b.end(kind)
}

/// Whether a SASLInitialResponse body is a mechanism name, then a length
/// (-1 for none) and exactly that many bytes.
pub(crate) fn check_sasl_initial(body: &[u8]) -> Result<(), String> {
    let mut b = Body(body);
    b.cstring("SASLInitialResponse: the mechanism")?;
    let len = b.i32("SASLInitialResponse: the length")?;
    if len >= 0 {
        b.take(len as usize, "SASLInitialResponse: the data")?;
    } else if len != -1 {
        return Err(format!("SASLInitialResponse: invalid length {len}"));
    }
    b.end(b'p')
}

/// An error that ends the connection (severity FATAL).
pub(crate) fn fatal(state: SqlState, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "FATAL".into(),
        state.code().into(),
        message,
    )))
}

/// FATAL 08P01 for a message that is not what its type says.
pub(crate) fn protocol_violation(why: &str) -> PgWireError {
    fatal(
        SqlState::PROTOCOL_VIOLATION,
        format!("invalid message from the client: {why}"),
    )
}

/// The bad-frame reason inside an error from the stream, if that is
/// what it is.
fn bad_frame(e: &PgWireError) -> Option<String> {
    let PgWireError::IoError(io) = e else {
        return None;
    };
    io.get_ref()
        .and_then(|inner| inner.downcast_ref::<BadFrame>())
        .map(|b| b.0.clone())
}

/// Serve one connection (module docs).
pub async fn serve<H: PgWireServerHandlers>(tcp: TcpStream, handlers: H) -> io::Result<()> {
    let addr = tcp.peer_addr()?;
    tcp.set_nodelay(true)?;
    let client = DefaultClient::new(addr, false);
    let mut socket = Framed::new(FrameGuard::new(tcp), PgWireMessageServerCodec::new(client));
    socket.set_state(PgWireConnectionState::AwaitingSslRequest);

    let startup_timeout = tokio::time::sleep(STARTUP_TIMEOUT);
    tokio::pin!(startup_timeout);

    let startup = handlers.startup_handler();
    let simple = handlers.simple_query_handler();
    let extended = handlers.extended_query_handler();
    let copy = handlers.copy_handler();
    let cancel = handlers.cancel_handler();
    let errors = handlers.error_handler();

    loop {
        let starting = matches!(
            socket.state(),
            PgWireConnectionState::AwaitingSslRequest
                | PgWireConnectionState::AwaitingStartup
                | PgWireConnectionState::AuthenticationInProgress
        );
        let msg = if starting {
            tokio::select! {
                _ = &mut startup_timeout => return Ok(()),
                m = socket.next() => m,
            }
        } else {
            socket.next().await
        };
        let msg = match msg {
            None => {
                // The client closed its side; it may still read.
                let _ = release(&mut socket).await;
                return Ok(());
            }
            Some(Ok(m)) => m,
            Some(Err(e)) => {
                // What is held goes out first, then the error.
                socket.get_mut().set_cork(false);
                // A frame the guard refused, or one pgwire could not decode
                // (over one of its own per-type size limits): FATAL 08P01.
                // A socket error: nothing more can be said.
                let why = bad_frame(&e)
                    .or_else(|| (!matches!(e, PgWireError::IoError(_))).then(|| e.to_string()));
                match why {
                    Some(why) => {
                        let _ = process_error(&mut socket, protocol_violation(&why), false).await;
                    }
                    None => {
                        let _ = release(&mut socket).await;
                    }
                }
                return Ok(());
            }
        };
        match msg {
            PgWireFrontendMessage::SslNegotiation(SslNegotiationMetaMessage::PostgresSsl(_)) => {
                socket
                    .send(PgWireBackendMessage::SslResponse(SslResponse::Refuse))
                    .await?;
                continue;
            }
            PgWireFrontendMessage::SslNegotiation(SslNegotiationMetaMessage::PostgresGss(_)) => {
                socket
                    .send(PgWireBackendMessage::GssEncResponse(GssEncResponse::Refuse))
                    .await?;
                continue;
            }
            PgWireFrontendMessage::Terminate(_) => {
                // Answers held for the messages before it still go out.
                let _ = release(&mut socket).await;
                return Ok(());
            }
            _ => {}
        }
        if matches!(socket.state(), PgWireConnectionState::AwaitingSslRequest) {
            socket.set_state(PgWireConnectionState::AwaitingStartup);
        }
        let extended_query = match socket.state() {
            PgWireConnectionState::CopyInProgress(e) => e,
            _ => msg.is_extended_query(),
        };
        let is_cancel = matches!(msg, PgWireFrontendMessage::CancelRequest(_));
        // Answers to a pipelined Parse, Bind, Describe, Execute or Close
        // wait for the rest of the pipeline's (CORK.1); the loop never
        // waits for input with output held (CORK.2).
        let corkable = matches!(
            msg,
            PgWireFrontendMessage::Parse(_)
                | PgWireFrontendMessage::Bind(_)
                | PgWireFrontendMessage::Describe(_)
                | PgWireFrontendMessage::Execute(_)
                | PgWireFrontendMessage::Close(_)
        );
        let cork = corkable && more_input(&socket);
        socket.get_mut().set_cork(cork);
        if let Err(mut e) = process_message(
            msg,
            &mut socket,
            startup.clone(),
            simple.clone(),
            extended.clone(),
            copy.clone(),
            cancel.clone(),
        )
        .await
        {
            errors.on_error(&socket, &mut e);
            let fatal = e.is_fatal();
            if fatal {
                socket.get_mut().set_cork(false);
            }
            process_error(&mut socket, e, extended_query).await?;
            if fatal {
                return Ok(());
            }
        }
        if is_cancel {
            return Ok(());
        }
        if !more_input(&socket) {
            // CORK.2: everything out before the next read can wait.
            release(&mut socket).await?;
        }
    }
}

/// Uncork and write out everything held (CORK.2, and before the loop
/// ends).
async fn release<C>(socket: &mut Framed<FrameGuard<TcpStream>, C>) -> io::Result<()>
where
    Framed<FrameGuard<TcpStream>, C>: futures::Sink<PgWireBackendMessage, Error = io::Error>,
{
    socket.get_mut().set_cork(false);
    SinkExt::<PgWireBackendMessage>::flush(socket).await
}

/// Whether a whole message the client sent is already buffered (so the
/// loop will handle it without waiting for the client).
fn more_input<C>(socket: &Framed<FrameGuard<TcpStream>, C>) -> bool {
    !socket.read_buffer().is_empty() || socket.get_ref().has_checked_frames()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that records each write it is given.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl AsyncWrite for Writes {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.0.push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn a_startup_packet_ends_at_its_terminator() {
        assert!(check_startup_params(b"user\0a\0database\0d\0\0").is_ok());
        assert!(check_startup_params(b"\0").is_ok());
        // A terminator with more after it: pgwire would read the rest as
        // messages the guard never checked (found by fuzz/bounded.sh).
        assert!(check_startup_params(b"user\0a\0\0B\0\0\0\x0fp\0").is_err());
        assert!(check_startup_params(b"user\0\0\0\0").is_err());
        assert!(check_startup_params(b"user\0a\0").is_err());
    }

    #[test]
    fn corked_output_goes_out_in_one_write_after_uncorking() {
        use tokio::io::AsyncWriteExt;
        futures::executor::block_on(async {
            let mut g = FrameGuard::new(Writes::default());
            g.set_cork(true);
            for part in [&b"2\0\0\0\x04"[..], b"n\0\0\0\x04", b"C\0\0\0\x05x\0"] {
                g.write_all(part).await.unwrap();
                g.flush().await.unwrap();
            }
            assert!(g.inner.0.is_empty(), "corked output reached the socket");
            g.set_cork(false);
            g.write_all(b"Z\0\0\0\x05I").await.unwrap();
            g.flush().await.unwrap();
            assert_eq!(
                g.inner.0,
                vec![b"2\0\0\0\x04n\0\0\0\x04C\0\0\0\x05x\0Z\0\0\0\x05I".to_vec()]
            );
            // Past the limit, what is held goes out and the write goes through.
            g.inner.0.clear();
            g.set_cork(true);
            g.write_all(b"head").await.unwrap();
            let big = vec![7u8; CORK_LIMIT];
            g.write_all(&big).await.unwrap();
            assert_eq!(g.inner.0, vec![b"head".to_vec(), big]);
            // Uncorked with nothing held: straight through.
            g.inner.0.clear();
            g.set_cork(false);
            g.write_all(b"x").await.unwrap();
            assert_eq!(g.inner.0, vec![b"x".to_vec()]);
            // Shutting down writes what is held first.
            g.inner.0.clear();
            g.set_cork(true);
            g.write_all(b"last").await.unwrap();
            g.shutdown().await.unwrap();
            assert_eq!(g.inner.0, vec![b"last".to_vec()]);
        });
    }

    fn msg(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![kind];
        v.extend(((body.len() + 4) as i32).to_be_bytes());
        v.extend(body);
        v
    }

    fn guard(bytes: &[u8]) -> Result<Vec<u8>, String> {
        let mut g = FrameGuard::new(());
        g.phase = Phase::Messages;
        g.pending.extend_from_slice(bytes);
        g.check_pending()?;
        Ok(g.pending[..g.checked].to_vec())
    }

    #[test]
    fn whole_consistent_frames_pass_and_partial_ones_wait() {
        let parse = msg(b'P', b"s1\0SELECT $1\0\0\x01\0\0\0\x17");
        let sync = msg(b'S', b"");
        let both = [parse.clone(), sync.clone()].concat();
        assert_eq!(guard(&both).unwrap(), both);
        assert_eq!(guard(&both[..both.len() - 1]).unwrap(), parse);
    }

    /// Frames arriving a byte at a time come out whole and in order; a
    /// bad one after them reads as an error once the good ones are out.
    #[tokio::test]
    async fn frames_split_across_reads() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut startup = vec![0, 3, 0, 0];
        startup.extend(b"user\0me\0\0");
        let mut input = ((startup.len() + 4) as i32).to_be_bytes().to_vec();
        input.extend(&startup);
        input.extend(msg(b'P', b"s1\0SELECT $1\0\0\x01\0\0\0\x17"));
        input.extend(msg(b'S', b""));
        let good = input.len();
        input.extend(msg(b'E', b"\0\0"));
        let (mut client, server) = tokio::io::duplex(64);
        let writer = tokio::spawn(async move {
            for b in input {
                client.write_all(&[b]).await.unwrap();
            }
            client.shutdown().await.unwrap();
            client
        });
        let mut g = FrameGuard::new(server);
        let mut out = vec![0u8; good];
        g.read_exact(&mut out).await.unwrap();
        let err = g.read_u8().await.unwrap_err();
        assert!(err.to_string().contains("the row limit"), "{err}");
        drop(writer.await.unwrap());
    }

    #[test]
    fn counts_that_lie_are_refused() {
        for (kind, body, want) in [
            (
                b'P',
                &b"s1\0SELECT 1\0\0\x02\0\0\0\x17"[..],
                "parameter types",
            ),
            (b'P', b"s1\0SELECT 1\0\0\0\0", "left over"),
            (b'P', b"s1\0SELECT 1\0\xff\xff", "negative count"),
            (
                b'B',
                b"\0\0\0\0\0\x01\0\0\0\x09ab\0\0",
                "a parameter's value",
            ),
            (
                b'B',
                b"\0\0\0\0\0\x01\xff\xff\xff\xfe\0\0",
                "invalid parameter length",
            ),
            (b'D', b"Xname\0", "expected 'S' or 'P'"),
            (b'E', b"\0\0\0", "the row limit"),
            (b'Q', b"SELECT 1", "no terminating zero"),
            (b'Q', b"SELECT 1\0\0", "left over"),
            (b'S', b"x", "left over"),
            (b'z', b"", "invalid frontend message type"),
        ] {
            let err = guard(&msg(kind, body)).unwrap_err();
            assert!(err.contains(want), "{}: {err}", kind as char);
        }
        let mut huge = vec![b'Q'];
        huge.extend(((MAX_MESSAGE + 5) as i32).to_be_bytes());
        assert!(guard(&huge).unwrap_err().contains("larger than"));
        assert!(
            guard(&[b'Q', 0, 0, 0, 2])
                .unwrap_err()
                .contains("invalid message length")
        );
    }

    #[test]
    fn startup_phase_packets() {
        let mut g = FrameGuard::new(());
        let ssl = [0, 0, 0, 8, 4, 210, 22, 47];
        let mut startup = vec![0, 3, 0, 0];
        startup.extend(b"user\0me\0\0");
        let mut pkt = ((startup.len() + 4) as i32).to_be_bytes().to_vec();
        pkt.extend(&startup);
        g.pending.extend_from_slice(&ssl);
        g.pending.extend_from_slice(&pkt);
        g.pending.extend_from_slice(&msg(b'S', b""));
        g.check_pending().unwrap();
        assert_eq!(g.phase, Phase::Messages);
        assert_eq!(g.checked, g.pending.len());
        let mut bad = FrameGuard::new(());
        bad.pending
            .extend_from_slice(&[0, 0, 0, 9, 0, 3, 0, 0, b'u']);
        assert!(
            bad.check_pending()
                .unwrap_err()
                .contains("no terminating zero")
        );
        assert!(check_sasl_initial(b"SCRAM-SHA-256\0\0\0\0\x06n,,n=").is_err());
        assert!(check_sasl_initial(b"SCRAM-SHA-256\0\0\0\0\x04n,,n").is_ok());
    }
}
