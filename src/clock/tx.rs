//! Kernel transmit stamps: when a chunk's bytes actually left the simulator.
//!
//! Owns: switching on `SO_TIMESTAMPING` (software transmit stamps, keyed by byte offset) on
//! an accepted socket, counting the bytes written to it, reading the stamps back from the
//! socket's error queue after each write (and on flush), and filling in the write time of
//! each chunk that asked for one ([`TxLog::watch`]).
//! Does not own: which chunks are content (the model) or the trace itself; the system calls
//! and the control-message decoding ([`crate::sys::stamp`]).
//!
//! Why: the simulator stamps a chunk just before its connection writes it. If the thread is
//! descheduled between that instant and the `write` (a VM's vCPU pause, a busy runtime), the
//! bytes leave later than the stamp says, and a client measured against it looks late. The
//! kernel's transmit stamp is taken as the bytes leave; on loopback that is inside the write
//! call, so the stamp is already queued when the write returns.
//!
//! Keying: with `SOF_TIMESTAMPING_OPT_ID` a TCP stamp carries the offset (mod 2^32) of the
//! last byte of the write it belongs to, counted from when the option was set (before the
//! first byte). A chunk's bytes start at or after the connection's byte count when it was
//! stamped (`written_before`) and end no earlier than `written_before + len - 1` (`len`, its
//! plaintext size: framing and TLS only add bytes). The chunks of one response leave in the
//! order they were stamped, so a chunk's bytes also start after the previous chunk's bound in
//! the same response (HTTP/2 buffers frames: the connection count can lag behind the chunks
//! already taken). The caller keeps that chain per response ([`Chain`]), so a stream whose
//! frames were dropped (cancelled) or overtaken by another stream's does not shift the
//! others. Its write time is the stamp of the first write that ended at or past its bound.

use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use crate::sys::stamp;

/// A chunk's write time, filled in once its write's stamp is read.
pub type Sent = Arc<OnceLock<Instant>>;

/// Chunks waiting for their stamp; more than this and the oldest are given up (their trace
/// keeps the instant before the write).
const MAX_PENDING: usize = 4096;

/// The bound of the latest chunk watched in one response (`None` before the first).
pub type Chain = Option<u64>;

/// One connection's transmit log.
#[derive(Debug, Default)]
pub struct TxLog {
    written: AtomicU64,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// (last byte ends at or past, slot)
    pending: VecDeque<(u64, Sent)>,
}

impl TxLog {
    /// Bytes written to the socket so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    /// A slot for the write time of a chunk of `len` bytes about to be written, the next in
    /// the response whose chain `chain` is.
    pub fn watch(&self, len: usize, chain: &mut Chain) -> Sent {
        let sent = Sent::default();
        let start = match *chain {
            Some(b) => self.written().max(b + 1),
            None => self.written(),
        };
        let bound = start + (len.max(1) as u64) - 1;
        *chain = Some(bound);
        let mut g = self.lock();
        g.pending.push_back((bound, sent.clone()));
        if g.pending.len() > MAX_PENDING {
            g.pending.pop_front();
        }
        sent
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes a write of `n` bytes; returns the offset of its last byte.
    pub fn wrote(&self, n: usize) -> u64 {
        if n == 0 {
            return self.written().wrapping_sub(1);
        }
        self.written.fetch_add(n as u64, Ordering::AcqRel) + n as u64 - 1
    }

    /// A stamp arrived for the write whose last byte has offset `id` (mod 2^32).
    fn stamped(&self, id: u32, at: Instant) {
        // The full offset: the latest written offset whose low 32 bits are `id` (stamps are
        // only ever for bytes already counted).
        let Some(last) = self.written().checked_sub(1) else {
            return;
        };
        let end = last.saturating_sub(u64::from((last as u32).wrapping_sub(id)));
        let mut g = self.lock();
        g.pending.retain(|(bound, sent)| {
            if *bound <= end {
                let _ = sent.set(at);
                false
            } else {
                true
            }
        });
    }
}

/// Turns on transmit stamps for `fd` (before anything was written to it). `false` when the
/// kernel refuses (an old kernel).
pub fn enable(fd: RawFd) -> bool {
    stamp::enable_transmit(fd)
}

/// Reads every stamp waiting on `fd`'s error queue (called after each write, and on flush
/// for a stamp the kernel took after its write returned).
pub fn drain(fd: RawFd, log: &TxLog) {
    while let Some((id, at)) = stamp::read_transmit(fd) {
        log.stamped(id, super::realtime_to_instant(at));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    #[test]
    fn each_chunk_gets_the_stamp_of_the_write_that_carried_it() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        assert!(enable(server.as_raw_fd()), "SO_TIMESTAMPING refused");
        let log = TxLog::default();
        let write = |server: &mut std::net::TcpStream, bytes: &[u8]| {
            let n = server.write(bytes).expect("write");
            log.wrote(n);
            drain(server.as_raw_fd(), &log);
        };
        // Chunk A asks for its stamp, then sleeps 20 ms before its write: the stamp is the
        // write's, not the moment it asked.
        let asked = Instant::now();
        let mut chain = Chain::None;
        let a = log.watch(5, &mut chain);
        std::thread::sleep(Duration::from_millis(20));
        let before = Instant::now();
        write(&mut server, b"aaaaa");
        let after = Instant::now();
        let at = *a.get().expect("chunk A stamped");
        assert!(at >= before - Duration::from_millis(2), "{:?}", at - asked);
        assert!(at <= after + Duration::from_millis(2));
        // Two chunks asked for together and written in one write share its stamp; a third,
        // asked for later, waits for its own write.
        let b = log.watch(3, &mut chain);
        let c = log.watch(4, &mut chain);
        write(&mut server, b"bbbcccc");
        let d = log.watch(2, &mut chain);
        assert_eq!(b.get(), c.get());
        assert!(b.get().is_some());
        assert!(d.get().is_none(), "not written yet");
        std::thread::sleep(Duration::from_millis(5));
        write(&mut server, b"dd");
        assert!(d.get().expect("d") > c.get().expect("c"));
        assert_eq!(log.written(), 14);
        let mut got = [0u8; 14];
        client.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"aaaaabbbccccdd");
    }

    #[test]
    fn a_late_stamp_of_an_earlier_write_does_not_stamp_a_later_chunk() {
        let log = TxLog::default();
        // A write of 10 bytes went out before a 2-byte chunk asked, and its stamp is read
        // only afterwards: it began before the chunk, so it is not the chunk's.
        let end = log.wrote(10);
        let early = log.watch(2, &mut None);
        log.stamped(end as u32, Instant::now());
        assert!(early.get().is_none());
        let end2 = log.wrote(2);
        let t = Instant::now();
        log.stamped(end2 as u32, t);
        assert_eq!(early.get(), Some(&t));
    }
}

#[cfg(test)]
mod order_tests {
    use super::*;

    #[test]
    fn chunks_taken_before_the_previous_one_was_written_get_their_own_write() {
        // HTTP/2: chunks A and B are both taken (watched) before A's frame is written, so the
        // byte count is the same for both; B's write is the one after A's.
        let log = TxLog::default();
        let mut chain = Chain::None;
        let a = log.watch(100, &mut chain);
        let b = log.watch(100, &mut chain);
        let end_a = log.wrote(130); // A with framing and TLS overhead
        let ta = Instant::now();
        log.stamped(end_a as u32, ta);
        assert_eq!(a.get(), Some(&ta));
        assert!(b.get().is_none(), "A's write does not carry B");
        let end_b = log.wrote(130);
        let tb = Instant::now();
        log.stamped(end_b as u32, tb);
        assert_eq!(b.get(), Some(&tb));
    }

    #[test]
    fn a_cancelled_stream_does_not_shift_another_streams_chunks() {
        // Stream 1 takes two chunks that are never written (cancelled); stream 2's chunk,
        // on its own chain, is stamped by its write.
        let log = TxLog::default();
        let (mut one, mut two) = (Chain::None, Chain::None);
        let _lost = (log.watch(100, &mut one), log.watch(100, &mut one));
        let c = log.watch(100, &mut two);
        let end = log.wrote(130);
        let t = Instant::now();
        log.stamped(end as u32, t);
        assert_eq!(c.get(), Some(&t));
    }
}
