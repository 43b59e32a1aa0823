//! What the kernel knows about a connection's socket, asked without reading from it: has the
//! server closed an idle connection, and did the server's kernel reset a connection because
//! data arrived after its application had closed it.
//!
//! Owns: a duplicate of the TCP socket's descriptor (so the questions never reach a
//! recycled descriptor number after the stream above was dropped), and reading its answers
//! to `MSG_PEEK` liveness checks, `SO_ERROR` and `TCP_INFO` as connection states.
//! Does not own: the decision to reuse or re-send (see [`super::session`]); the system calls
//! ([`crate::sys::socket`]).
//!
//! Why a reset proves the request never reached the server: a TCP stack resets (RST) a
//! connection whose application closes it with received data still unread, and answers
//! data that arrives after its application closed the socket with a RST. A server that
//! *read* the request and then closed sends a FIN only. So a reused connection that ends
//! with no response byte and a reset carried a request that no server application read
//! in full; one that ends with a FIN alone may have been read, and is never re-sent. (A
//! server that aborts a connection with `SO_LINGER` 0 right after reading a request, before
//! answering, would be taken for the first kind; none of the servers we know does that.)

use std::io::ErrorKind;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use crate::sys::socket;

/// The socket's state as an idle connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Open, nothing pending: fit for a new request.
    Open,
    /// The server closed it (FIN or RST seen).
    Closed,
    /// Bytes arrived that no request asked for (a `408`, an error envelope): not reusable.
    Unsolicited,
}

/// A duplicate descriptor of one connection's TCP socket.
#[derive(Debug)]
pub struct SockProbe {
    fd: OwnedFd,
}

impl SockProbe {
    /// Duplicates `sock`'s descriptor; `None` when the kernel refuses (no probe then, and
    /// connections are reused and failures classified as if the probe said "open" / "not
    /// reset").
    pub fn new(sock: &impl AsRawFd) -> Option<SockProbe> {
        socket::dup_cloexec(sock.as_raw_fd()).map(|fd| SockProbe { fd })
    }

    /// Peeks without blocking or consuming: what an idle connection's socket holds.
    pub fn idle(&self) -> Idle {
        match socket::peek_byte(self.fd.as_raw_fd()) {
            Ok(0) => Idle::Closed,
            Ok(_) => Idle::Unsolicited,
            Err(e) => match e.kind() {
                // EAGAIN (nothing there yet) or EINTR.
                ErrorKind::WouldBlock | ErrorKind::Interrupted => Idle::Open,
                _ => Idle::Closed,
            },
        }
    }

    /// True when the socket holds a pending reset error (`ECONNRESET`, or `EPIPE` for a
    /// reset that came after the peer's FIN). Reading it clears it, so the caller also
    /// looks at the errors the stream above reported (it may have taken the error first).
    pub fn reset(&self) -> bool {
        matches!(
            socket::pending_error(self.fd.as_raw_fd()),
            Ok(Some(e)) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe)
        )
    }

    /// The kernel's smoothed round-trip time of the connection.
    pub fn srtt(&self) -> Option<Duration> {
        socket::tcp_srtt(self.fd.as_raw_fd())
    }

    /// Waits up to `bound` for [`Self::reset`]; true when the reset came.
    pub async fn await_reset(&self, bound: Duration) -> bool {
        let until = crate::clock::now() + bound;
        loop {
            if self.reset() {
                return true;
            }
            if crate::clock::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// How long to wait for a reset after a reused connection failed with no response:
    /// the data must cross to the server and the RST come back, so several of the
    /// kernel's round trips, plus the emulated link's round trip when one is in between.
    pub fn reset_bound(&self, link_rtt: Duration) -> Duration {
        let srtt = self.srtt().unwrap_or(Duration::from_millis(1));
        link_rtt + (srtt * 4).max(Duration::from_millis(10))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn an_idle_connection_closed_by_the_server_is_seen_and_data_after_close_is_reset() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let probe = SockProbe::new(&client).unwrap();
        assert_eq!(probe.idle(), Idle::Open);
        assert!(!probe.reset());
        // The server closes its idle side: FIN.
        drop(server);
        let t0 = crate::clock::now();
        while probe.idle() != Idle::Closed {
            assert!(
                crate::clock::since(t0) < Duration::from_secs(2),
                "FIN never seen"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // FIN alone is not a reset: the server could have read what we sent before.
        assert!(!probe.reset());
        // Data on the closed connection: the server's kernel answers with RST.
        client.write_all(b"POST / HTTP/1.1\r\n\r\n").unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        assert!(rt.block_on(probe.await_reset(Duration::from_secs(2))));
    }

    #[test]
    fn a_server_that_closes_with_the_request_unread_resets() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let probe = SockProbe::new(&client).unwrap();
        client.write_all(b"POST / HTTP/1.1\r\n\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(5));
        drop(server);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        assert!(rt.block_on(probe.await_reset(Duration::from_secs(2))));
    }

    #[test]
    fn a_server_that_read_the_request_and_closed_is_not_a_reset() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let probe = SockProbe::new(&client).unwrap();
        client.write_all(b"POST / HTTP/1.1\r\n\r\n").unwrap();
        let mut buf = [0u8; 64];
        let n = server.read(&mut buf).unwrap();
        assert!(n > 0);
        drop(server);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        assert!(!rt.block_on(probe.await_reset(Duration::from_millis(50))));
        assert_eq!(probe.idle(), Idle::Closed);
        // Our side closing too (FIN, as the HTTP client does when it gives up) is no reset.
        client.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(!rt.block_on(probe.await_reset(Duration::from_millis(50))));
    }

    #[test]
    fn unsolicited_bytes_on_an_idle_connection_are_seen_and_left_in_place() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let probe = SockProbe::new(&client).unwrap();
        server
            .write_all(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
            .unwrap();
        let t0 = crate::clock::now();
        while probe.idle() != Idle::Unsolicited {
            assert!(
                crate::clock::since(t0) < Duration::from_secs(2),
                "bytes never seen"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut buf = [0u8; 12];
        client.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"HTTP/1.1 408");
    }
}
