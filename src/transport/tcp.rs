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
//! Owns: the socket's creation and the connect. Does not own: socket options
//! (see [`super::connect`]).

use std::io;
use std::mem::size_of;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Connects to `addr`, returning as soon as the kernel says the connection is established.
pub async fn connect(addr: SocketAddr) -> io::Result<tokio::net::TcpStream> {
    let (fd, done) = start(addr)?;
    let std = std::net::TcpStream::from(fd);
    if done {
        return tokio::net::TcpStream::from_std(std);
    }
    let tcp = tokio::net::TcpStream::from_std(std)?;
    tcp.writable().await?;
    finished(&tcp)?;
    Ok(tcp)
}

/// A non-blocking socket with its `connect` issued; `true` when the handshake is already over
/// (an error the kernel already knows, such as a refused connection, is returned).
fn start(addr: SocketAddr) -> io::Result<(OwnedFd, bool)> {
    let family = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    // SAFETY: plain socket creation; the result is -1 or a descriptor nobody else owns.
    let raw = unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor (checked non-negative) that only `fd` owns from here.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let (storage, len) = sockaddr(addr);
    // SAFETY: `storage` holds a valid sockaddr of `len` bytes for `addr`'s family, and lives
    // across the call.
    let rc = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast::<libc::sockaddr>(),
            len,
        )
    };
    if rc == 0 {
        return Ok((fd, true));
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::EINPROGRESS) {
        return Err(err);
    }
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one `pollfd` we own; a zero timeout never blocks.
    let n = unsafe { libc::poll(&mut pfd, 1, 0) };
    if n != 1 {
        return Ok((fd, false));
    }
    finished(&fd)?;
    Ok((fd, true))
}

/// After the socket turned writable: the connect's error, if it failed.
fn finished(sock: &impl AsRawFd) -> io::Result<()> {
    let mut err: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `err` and `len` are ours and sized for SO_ERROR's int.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if err != 0 {
        return Err(io::Error::from_raw_os_error(err));
    }
    Ok(())
}

/// `addr` as a C socket address.
fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero bytes are a valid `sockaddr_storage`.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: `sockaddr_storage` is larger than and aligned for `sockaddr_in`.
            unsafe {
                (&mut storage as *mut libc::sockaddr_storage)
                    .cast::<libc::sockaddr_in>()
                    .write(sin)
            };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: `sockaddr_storage` is larger than and aligned for `sockaddr_in6`.
            unsafe {
                (&mut storage as *mut libc::sockaddr_storage)
                    .cast::<libc::sockaddr_in6>()
                    .write(sin6)
            };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
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
