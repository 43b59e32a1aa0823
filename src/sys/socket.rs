//! Socket calls `std` and tokio do not make: a connect that does not wait for the reactor,
//! a socket's pending error, a duplicate descriptor, a peek, `TCP_INFO`, and a non-blocking
//! `sendmsg`.
//!
//! Owns: `socket`, `connect`, `poll`, `getsockopt(SO_ERROR)`, `getsockopt(TCP_INFO)`,
//! `fcntl(F_DUPFD_CLOEXEC)`, `recv(MSG_PEEK)` and `sendmsg`, with the C socket addresses they
//! take.
//! Does not own: when to call them or what an answer means (transport's `tcp` and
//! `sockstate`, `clock::rx`'s writes); timestamping options ([`super::stamp`]).

use std::io;
use std::mem::size_of;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// A non-blocking, close-on-exec TCP socket with its `connect` to `addr` issued, and whether
/// the handshake is already over (checked with a zero-timeout `poll`, which never blocks).
/// An error the kernel already knows, such as a refused connection, is returned.
pub fn connect_nonblocking(addr: SocketAddr) -> io::Result<(OwnedFd, bool)> {
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
    match pending_error(fd.as_raw_fd())? {
        Some(e) => Err(e),
        None => Ok((fd, true)),
    }
}

/// Takes the socket's pending error (`SO_ERROR`; reading it clears it): `None` when there is
/// none; an `Err` when the kernel would not say.
pub fn pending_error(fd: RawFd) -> io::Result<Option<io::Error>> {
    let mut err: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a descriptor the caller owns, and `err` and `len` are ours and sized for
    // SO_ERROR's int.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((err != 0).then(|| io::Error::from_raw_os_error(err)))
}

/// A close-on-exec duplicate of `fd`; `None` when the kernel refuses.
pub fn dup_cloexec(fd: RawFd) -> Option<OwnedFd> {
    // SAFETY: `dup` on a descriptor the caller's live socket owns; the result is either -1
    // or a new descriptor that nothing else owns.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    // SAFETY: `dup` is a fresh descriptor owned by nobody else (checked non-negative), which
    // `OwnedFd` takes over.
    (dup >= 0).then(|| unsafe { OwnedFd::from_raw_fd(dup) })
}

/// Peeks at one byte of `fd` without blocking or consuming it (`MSG_PEEK | MSG_DONTWAIT`):
/// 0 at end of stream, 1 when a byte waits; `WouldBlock` when none does yet.
pub fn peek_byte(fd: RawFd) -> io::Result<usize> {
    let mut byte = [0u8; 1];
    // SAFETY: a 1-byte buffer we own; MSG_PEEK leaves the data in the socket for the
    // stream above, MSG_DONTWAIT never blocks.
    let n = unsafe {
        libc::recv(
            fd,
            byte.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// The kernel's smoothed round-trip time of the TCP connection on `fd` (`TCP_INFO`'s
/// `tcpi_rtt`); `None` when the kernel would not say.
pub fn tcp_srtt(fd: RawFd) -> Option<Duration> {
    // SAFETY: tcp_info is plain old data; the kernel fills at most `len` bytes of it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: a valid descriptor, a buffer of `len` bytes and its length.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (rc == 0).then(|| Duration::from_micros(u64::from(info.tcpi_rtt)))
}

/// One non-blocking `sendmsg` of `bufs` on `fd` (`MSG_DONTWAIT`, never `SIGPIPE`); retried on
/// `EINTR`. A full send buffer is `WouldBlock`.
pub fn send_nonblocking(fd: RawFd, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    let bufs = &bufs[..bufs.len().min(libc::UIO_MAXIOV as usize)];
    // SAFETY: msghdr is a plain C struct; all-zero is a valid empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // `IoSlice` is guaranteed ABI-compatible with `iovec` on Unix; sendmsg only reads it.
    msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = bufs.len() as _;
    loop {
        // SAFETY: `msg` points at `bufs`, which outlive the call.
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
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
