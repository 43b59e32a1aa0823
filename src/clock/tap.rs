//! A byte stream with hooks: the one forwarding `AsyncRead`/`AsyncWrite` of every stream
//! that stamps, counts or reshapes its bytes on the way through.
//!
//! Owns: passing each I/O call of a [`Tapped`] stream to its [`Tap`], whose methods default
//! to passing the call straight to the stream inside; a tap overrides only what it changes
//! (the kernel's receive stamps in [`super::rx`], transport's byte meter and one-TLS-record
//! reads, the link emulator's near end, the simulator's transmit-stamped socket).
//! Does not own: any of those behaviours.
//!
//! Vectored writes: a tap that must see every byte through its own `poll_write` sets
//! [`Tap::VECTORED`] to false; a vectored write then writes the first non-empty buffer
//! through [`Tap::poll_write`], as tokio's default does.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What a [`Tapped`] stream does besides passing bytes to and from its [`Tap::Io`].
pub trait Tap: Unpin {
    /// The stream inside.
    type Io: AsyncRead + AsyncWrite + Unpin;

    /// Whether vectored writes reach [`Tap::poll_write_vectored`]; when false they are split
    /// as tokio's default does and reach [`Tap::poll_write`].
    const VECTORED: bool = true;

    /// A read.
    fn poll_read(
        &mut self,
        io: &mut Self::Io,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(io).poll_read(cx, buf)
    }

    /// A write.
    fn poll_write(
        &mut self,
        io: &mut Self::Io,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(io).poll_write(cx, buf)
    }

    /// A vectored write (only when [`Tap::VECTORED`]).
    fn poll_write_vectored(
        &mut self,
        io: &mut Self::Io,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(io).poll_write_vectored(cx, bufs)
    }

    /// A flush.
    fn poll_flush(&mut self, io: &mut Self::Io, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(io).poll_flush(cx)
    }

    /// A shutdown.
    fn poll_shutdown(&mut self, io: &mut Self::Io, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(io).poll_shutdown(cx)
    }

    /// Runs when the stream is dropped, before `io` is.
    fn on_drop(&mut self, _io: &mut Self::Io) {}
}

/// A byte stream (`H::Io`) whose I/O goes through the tap `H`.
pub struct Tapped<H: Tap> {
    io: H::Io,
    tap: H,
}

impl<H: Tap> Tapped<H> {
    /// `io` through `tap`.
    pub fn wrap(io: H::Io, tap: H) -> Self {
        Tapped { io, tap }
    }

    /// The tap.
    pub fn tap(&self) -> &H {
        &self.tap
    }
}

impl<H: Tap> Drop for Tapped<H> {
    fn drop(&mut self) {
        self.tap.on_drop(&mut self.io);
    }
}

impl<H: Tap> AsyncRead for Tapped<H> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.tap.poll_read(&mut this.io, cx, buf)
    }
}

impl<H: Tap> AsyncWrite for Tapped<H> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.tap.poll_write(&mut this.io, cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if H::VECTORED {
            this.tap.poll_write_vectored(&mut this.io, cx, bufs)
        } else {
            let buf = bufs
                .iter()
                .find(|b| !b.is_empty())
                .map_or(&[][..], |b| &**b);
            this.tap.poll_write(&mut this.io, cx, buf)
        }
    }

    fn is_write_vectored(&self) -> bool {
        H::VECTORED && self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.tap.poll_flush(&mut this.io, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.tap.poll_shutdown(&mut this.io, cx)
    }
}
