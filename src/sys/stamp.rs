//! The kernel's socket timestamps: when received bytes arrived (`SO_TIMESTAMPNS`) and when
//! written bytes left (`SO_TIMESTAMPING`, read back from the socket's error queue).
//!
//! Owns: setting the options, one `recvmsg` with a walk over the control messages the
//! kernel attached, and decoding the stamps out of them (`SCM_TIMESTAMPNS`,
//! `SCM_TIMESTAMPING` with its `sock_extended_err`). Stamps come back as `CLOCK_REALTIME`
//! durations since the Unix epoch.
//! Does not own: what a stamp means (moving it onto the monotonic clock, which read or chunk
//! it belongs to: [`crate::clock`]'s `rx` and `tx`).

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::RawFd;
use std::time::Duration;

/// `SO_TIMESTAMPING` (and `SCM_TIMESTAMPING`) on Linux; the libc crate lacks it for glibc.
const SO_TIMESTAMPING: libc::c_int = 37;
/// `SCM_TSTAMP_SND`: the stamp was taken as the bytes left for the device.
const SCM_TSTAMP_SND: u32 = 0;

/// Asks the kernel to stamp every segment received on `fd` (`SO_TIMESTAMPNS`); true when it
/// accepted.
pub fn enable_receive(fd: RawFd) -> bool {
    set_int_option(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
}

/// One non-blocking `recvmsg` on `fd` into `buf`; returns the byte count and the kernel's
/// `CLOCK_REALTIME` stamp of the last segment consumed, when it gave one.
pub fn recv_stamped(
    fd: RawFd,
    buf: &mut [MaybeUninit<u8>],
) -> io::Result<(usize, Option<Duration>)> {
    // Room for one or two control messages.
    let mut control = [0u64; 16];
    let mut stamp = None;
    let n = recvmsg(fd, Some(buf), libc::MSG_DONTWAIT, &mut control, |cmsg| {
        if cmsg.level == libc::SOL_SOCKET && cmsg.kind == libc::SCM_TIMESTAMPNS {
            if let Some(ts) = cmsg.timespec() {
                stamp = stamp_of(ts).or(stamp);
            }
        }
    })?;
    Ok((n, stamp))
}

/// Turns on software transmit stamps keyed by byte offset (`SO_TIMESTAMPING` with
/// `OPT_ID` and `OPT_TSONLY`) for `fd`, before anything was written to it; false when the
/// kernel refuses (an old kernel).
pub fn enable_transmit(fd: RawFd) -> bool {
    let flags: libc::c_uint = libc::SOF_TIMESTAMPING_TX_SOFTWARE
        | libc::SOF_TIMESTAMPING_SOFTWARE
        | libc::SOF_TIMESTAMPING_OPT_ID
        | libc::SOF_TIMESTAMPING_OPT_TSONLY;
    // The kernel reads the flags as an int; the bits are the same.
    set_int_option(fd, libc::SOL_SOCKET, SO_TIMESTAMPING, flags as libc::c_int)
}

/// One transmit stamp from `fd`'s error queue: (the offset mod 2^32 of the last byte of the
/// write it belongs to, the `CLOCK_REALTIME` stamp). Skips anything else the queue holds;
/// `None` when it is empty.
pub fn read_transmit(fd: RawFd) -> Option<(u32, Duration)> {
    loop {
        let mut control = [0u64; 32];
        let (mut stamp, mut id) = (None, None);
        let flags = libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT;
        recvmsg(fd, None, flags, &mut control, |cmsg| {
            let (level, kind) = (cmsg.level, cmsg.kind);
            if level == libc::SOL_SOCKET && kind == SO_TIMESTAMPING {
                // scm_timestamping: [software, (deprecated), hardware].
                if let Some([ts, _, _]) = cmsg.timestamping() {
                    stamp = stamp_of(ts).or(stamp);
                }
            } else if (level == libc::SOL_IP && kind == libc::IP_RECVERR)
                || (level == libc::SOL_IPV6 && kind == libc::IPV6_RECVERR)
            {
                if let Some(e) = cmsg.extended_err() {
                    if e.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING
                        && e.ee_errno == libc::ENOMSG as u32
                        && e.ee_info == SCM_TSTAMP_SND
                    {
                        id = Some(e.ee_data);
                    }
                }
            }
        })
        .ok()?;
        if let (Some(s), Some(id)) = (stamp, id) {
            return Some((id, s));
        }
        // Something other than a transmit stamp: skip it and read on.
    }
}

/// A kernel `timespec` as a duration since the epoch; `None` for an empty or invalid one.
fn stamp_of(ts: libc::timespec) -> Option<Duration> {
    (ts.tv_sec > 0 && ts.tv_nsec >= 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// Sets the integer socket option `level`/`name` on `fd` to `value`; true when the kernel
/// accepted it.
fn set_int_option(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> bool {
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

/// One control message of a [`recvmsg`], valid while the walk is at it.
struct Cmsg {
    /// `cmsg_level`.
    level: libc::c_int,
    /// `cmsg_type`.
    kind: libc::c_int,
    /// `cmsg_len`: header and payload.
    len: usize,
    data: *const libc::c_uchar,
}

impl Cmsg {
    /// The payload as a `timespec` (`SCM_TIMESTAMPNS`).
    fn timespec(&self) -> Option<libc::timespec> {
        self.read()
    }

    /// The payload as a `scm_timestamping` (`SCM_TIMESTAMPING`): software, (deprecated),
    /// hardware.
    fn timestamping(&self) -> Option<[libc::timespec; 3]> {
        self.read()
    }

    /// The payload as a `sock_extended_err` (`IP_RECVERR`, `IPV6_RECVERR`).
    fn extended_err(&self) -> Option<libc::sock_extended_err> {
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
fn recvmsg(
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
