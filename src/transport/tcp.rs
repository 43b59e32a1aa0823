//! Opening a TCP connection without a reactor round trip when the kernel completes it at once.
//!
//! `tokio::net::TcpStream::connect` issues a non-blocking `connect`, registers the socket and
//! then always waits for the reactor to report it writable: one trip through `epoll` and a
//! task wake-up, often on the other core. On loopback the kernel finishes the handshake inside
//! the `connect` call itself (the SYN, SYN-ACK and ACK are processed before it returns), so
//! that wait adds to every TTFT of the `http` transport (a connection per request) for
//! nothing: about twice a blocking connect's time (`docs/measurements.md`, "Opening a
//! connection").
//!
//! Here the `connect` is followed by a zero-timeout `poll`: a handshake that is already done
//! (or already refused) is known at once; otherwise the socket is handed to tokio and awaited
//! as before. Never blocks.
//!
//! Owns: the order of the connect and the wait. Does not own: the system calls
//! ([`crate::sys::socket`]) or socket options (see [`super::connect`]).

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use crate::sys::socket;

/// Connects to `addr`, returning as soon as the kernel says the connection is established.
pub async fn connect(addr: SocketAddr) -> io::Result<tokio::net::TcpStream> {
    let (fd, done) = socket::connect_nonblocking(addr)?;
    let std = std::net::TcpStream::from(fd);
    if done {
        return tokio::net::TcpStream::from_std(std);
    }
    let tcp = tokio::net::TcpStream::from_std(std)?;
    tcp.writable().await?;
    finished(&tcp)?;
    Ok(tcp)
}

/// After the socket turned writable: the connect's error, if it failed.
fn finished(sock: &impl AsRawFd) -> io::Result<()> {
    match socket::pending_error(sock.as_raw_fd())? {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn connects_over_v4_and_v6_and_carries_bytes() {
        for bind in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(l) = tokio::net::TcpListener::bind(bind).await else {
                continue; // no IPv6 on this machine
            };
            let addr = l.local_addr().unwrap();
            let server = tokio::spawn(async move {
                let (mut s, _) = l.accept().await.unwrap();
                let mut b = [0u8; 4];
                s.read_exact(&mut b).await.unwrap();
                s.write_all(&b).await.unwrap();
            });
            let mut c = connect(addr).await.unwrap();
            assert_eq!(c.peer_addr().unwrap(), addr);
            c.write_all(b"ping").await.unwrap();
            let mut b = [0u8; 4];
            c.read_exact(&mut b).await.unwrap();
            assert_eq!(&b, b"ping");
            server.await.unwrap();
        }
    }

    #[tokio::test]
    async fn a_refused_connection_is_an_error() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let e = connect(addr).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
    }
}
