//! The system calls behind the kernel's timestamps, each written once (Linux only).
//!
//! Owns: the process's CPU time (`CLOCK_PROCESS_CPUTIME_ID`, for the run's harness check),
//! setting an integer socket option (`SO_TIMESTAMPNS` for receive stamps, `SO_TIMESTAMPING`
//! for transmit stamps), one `recvmsg` with a walk over the control
//! messages the kernel attached, and the timer thread's timer slack. Every `unsafe` block of
//! [`super`] is here, with its SAFETY note, except the two in [`super::rx`]'s `poll_read`
//! that lend tokio's read buffer to `recvmsg`.
//! Does not own: which option or message means what (the callers, [`super::rx`] and
//! [`super::tx`], pick levels and types and decode payloads).

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::RawFd;

/// Sets the integer socket option `level`/`name` on `fd` to `value`; true when the kernel
/// accepted it.
pub fn set_int_option(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> bool {
    // SAFETY: a plain setsockopt on a socket the caller owns, with a correctly sized int.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// Sets the calling thread's timer slack to 1 ns (the default is 50 µs), so that its timed
/// sleeps wake when asked.
pub fn set_thread_timer_slack_1ns() {
    // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// One control message of a [`recvmsg`], valid while the walk is at it.
pub struct Cmsg {
    /// `cmsg_level`.
    pub level: libc::c_int,
    /// `cmsg_type`.
    pub kind: libc::c_int,
    /// `cmsg_len`: header and payload.
    len: usize,
    data: *const libc::c_uchar,
}

impl Cmsg {
    /// The payload as a `timespec` (`SCM_TIMESTAMPNS`).
    pub fn timespec(&self) -> Option<libc::timespec> {
        self.read()
    }

    /// The payload as a `scm_timestamping` (`SCM_TIMESTAMPING`): software, (deprecated),
    /// hardware.
    pub fn timestamping(&self) -> Option<[libc::timespec; 3]> {
        self.read()
    }

    /// The payload as a `sock_extended_err` (`IP_RECVERR`, `IPV6_RECVERR`).
    pub fn extended_err(&self) -> Option<libc::sock_extended_err> {
        self.read()
    }

    /// The payload as a `T`, when the message is long enough to hold one. `T` is one of the
    /// plain C structs above: integers only, so any bit pattern is a valid value.
    fn read<T: Copy>(&self) -> Option<T> {
        // SAFETY: CMSG_LEN is arithmetic; the message's length covers a `T` after its header
        // (checked first), `data` points into the control area the walk borrows, and `T` is
        // made of integers only (see above); the read is unaligned.
        unsafe {
            if self.len >= libc::CMSG_LEN(std::mem::size_of::<T>() as u32) as usize {
                Some(std::ptr::read_unaligned(self.data.cast::<T>()))
            } else {
                None
            }
        }
    }
}

/// One `recvmsg(fd, …, flags)`: into `buf` when given (one iovec), with `control` as the
/// control area (`u64` elements keep it aligned for `cmsghdr`). Calls `each` for every
/// control message the kernel attached, in order, and returns the byte count.
pub fn recvmsg(
    fd: RawFd,
    buf: Option<&mut [MaybeUninit<u8>]>,
    flags: libc::c_int,
    control: &mut [u64],
    mut each: impl FnMut(&Cmsg),
) -> io::Result<usize> {
    // SAFETY: msghdr is a plain C struct; all-zero is a valid empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    let mut iov;
    if let Some(buf) = buf {
        iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
    }
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(control) as _;
    // SAFETY: the iovec, when set, points at `buf` (valid for writes of its length) and the
    // control area at `control`; both outlive the call.
    let n = unsafe { libc::recvmsg(fd, &mut msg, flags) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel filled `msg`'s control area; CMSG_* walk it within its length, and
    // each header is read in place (CMSG_FIRSTHDR/NXTHDR return aligned headers or null).
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            // `cmsg_len` is usize on glibc and u32 on musl.
            #[allow(clippy::unnecessary_cast)]
            let len = (*cmsg).cmsg_len as usize;
            each(&Cmsg {
                level: (*cmsg).cmsg_level,
                kind: (*cmsg).cmsg_type,
                len,
                data: libc::CMSG_DATA(cmsg),
            });
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok(n as usize)
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

/// CPU time this process has used so far (user + system, every thread), from
/// `clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`; `None` if the kernel refused.
pub fn process_cpu_time() -> Option<std::time::Duration> {
    // SAFETY: timespec is a plain C struct; all-zero is a valid value.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: clock_gettime writes one timespec, which `ts` is, and reads nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// The kernel's estimated error of the wall clock (`adjtimex`'s `esterror`), ns, when NTP
/// keeps it synchronised; `None` when the clock is unsynchronised or the call fails.
pub fn ntp_estimated_error_ns() -> Option<u64> {
    // SAFETY: a zeroed timex with `modes = 0` asks adjtimex to read, not change, the clock
    // state; it writes only into `tx`.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state < 0 || state == libc::TIME_ERROR || tx.esterror < 0 {
        return None;
    }
    Some(tx.esterror as u64 * 1000)
}
