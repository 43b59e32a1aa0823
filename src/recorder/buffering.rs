//! Buffering detection: does a cell's stream arrive in bursts its server's cadence does not
//! explain? A reverse proxy that buffers responses (nginx's `proxy_buffering on`, its
//! default), or a server that writes without `TCP_NODELAY`, collapses a token stream into a
//! few large reads: TTFT moves towards E2E, ITL becomes "0 then a long gap", and TPOT measures
//! the middlebox, not the model. Nothing else in a run says so; this does.
//!
//! Owns: the per-request rule ([`classify`]), the per-cell verdict ([`Buffering`], the
//! `buffering` object of `summary.json`) and its warning line ([`warnings`]).
//! Does not own: the counts' bookkeeping across requests and shards (see `histograms`), the
//! chunk stamps (the transport stamps each read once; see `vocab::RequestRecord`), or where
//! the warning prints (the runner and the report call [`warnings`]).
//!
//! # The rule
//! Chunks that arrived in one read share one arrival stamp. A request is *checked* when it
//! succeeded, is measured, and kept at least [`MIN_CHUNKS`] (8) content chunks. A checked
//! request is *bursty* when either
//!
//! * **reads**: at least [`BURSTY_CHUNK_SHARE`] (75%) of its content chunks arrived in reads
//!   that carried at least `k` chunks, where `k` = [`BURST_READ_CHUNKS`] (4), or twice the
//!   server's documented write group when the server writes several chunks at once by design
//!   (a simulator profile's `chunks_per_write`: reads of up to two of its writes are its own
//!   cadence, not a middlebox); or
//! * **span** (only where the server reports its own timing, `ttft_ms` and `total_ms`, and
//!   its decode time `total − ttft` is at least [`MIN_SERVER_DECODE_MS`]): the client's first →
//!   last content arrival span is under [`SPAN_SHARE`] (25%) of the server's decode time: the
//!   server spent that long producing tokens, the client saw them in far less.
//!
//! A cell is *flagged* when at least [`FLAGGED_SHARE`] (50%) of its checked requests are
//! bursty. Why these numbers: on the simulator streaming straight to the client, 2–9% of
//! chunk gaps are 0 (the client read two chunks at once because it was a moment late), and
//! such coalescing is occasional and mostly pairs, so a request's share of chunks in 4-chunk
//! reads stays far below 75%, and half a cell's requests would have to hit it. A buffering
//! proxy delivers a buffer (nginx: 4–8 KiB, 20–50 chat-completions chunks) per read, or the
//! whole answer at the end: nearly every chunk is in a large read, in nearly every request.
//! Eight chunks is the shortest answer in which "most chunks in reads of 4+" means two bursts
//! or more, rather than one unlucky read.
//!
//! Without server timing, a client cannot tell a buffering middlebox from a server that
//! batches its writes on purpose (a real one, whose batching is documented nowhere the
//! client can read): the warning names both.

use serde::{Deserialize, Serialize};

use crate::vocab::RequestRecord;

/// The fewest content chunks a request needs to be checked.
pub const MIN_CHUNKS: usize = 8;
/// A read with at least this many chunks is a burst (for a server that writes one chunk at
/// a time).
pub const BURST_READ_CHUNKS: u32 = 4;
/// The share of a request's chunks that must arrive in bursts for it to be bursty.
pub const BURSTY_CHUNK_SHARE: f64 = 0.75;
/// With server timing: bursty when the client's decode span is under this share of the
/// server's decode time.
pub const SPAN_SHARE: f64 = 0.25;
/// The shortest server decode time the span rule judges, ms (below it, scheduling noise and
/// the server's own rounding dominate).
pub const MIN_SERVER_DECODE_MS: f64 = 20.0;
/// A cell is flagged when at least this share of its checked requests is bursty.
pub const FLAGGED_SHARE: f64 = 0.5;

/// The smallest read that counts as a burst for a server that writes `chunks_per_write`
/// chunks per write by design (1 for a server that writes each chunk when it is due).
pub fn burst_read_chunks(chunks_per_write: u32) -> u32 {
    BURST_READ_CHUNKS.max(chunks_per_write.saturating_mul(2))
}

/// One request's verdict: `None` when it is not checked (failed, or too few chunks kept),
/// otherwise whether it was bursty. `chunks_per_write` is the server's documented write group
/// (1 when it has none). Walks the chunks once; allocates nothing.
pub fn classify(r: &RequestRecord, chunks_per_write: u32) -> Option<bool> {
    if !r.is_ok() || r.chunks.len() < MIN_CHUNKS {
        return None;
    }
    let k = burst_read_chunks(chunks_per_write) as usize;
    let (mut in_bursts, mut run) = (0usize, 1usize);
    for w in r.chunks.windows(2) {
        if w[1].at_ns == w[0].at_ns {
            run += 1;
        } else {
            if run >= k {
                in_bursts += run;
            }
            run = 1;
        }
    }
    if run >= k {
        in_bursts += run;
    }
    let reads = in_bursts as f64 >= BURSTY_CHUNK_SHARE * r.chunks.len() as f64;
    Some(reads || span_collapsed(r))
}

/// The span rule: the server reported a decode time of at least [`MIN_SERVER_DECODE_MS`] and
/// the client's first → last chunk arrival span is under [`SPAN_SHARE`] of it.
fn span_collapsed(r: &RequestRecord) -> bool {
    let Some(t) = &r.server_timing else {
        return false;
    };
    let (Some(ttft), Some(total)) = (t.ttft_ms, t.total_ms) else {
        return false;
    };
    let decode_ms = total - ttft;
    let (Some(first), Some(last)) = (r.chunks.first(), r.chunks.last()) else {
        return false;
    };
    let span_ms = last.at_ns.saturating_sub(first.at_ns) as f64 / 1e6;
    decode_ms >= MIN_SERVER_DECODE_MS && span_ms < SPAN_SHARE * decode_ms
}

/// One cell's verdict (`summary.json`'s `buffering`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Buffering {
    /// Checked requests that were bursty.
    pub bursty_requests: u64,
    /// Successful measured requests with at least [`MIN_CHUNKS`] content chunks.
    pub checked_requests: u64,
    /// True when at least [`FLAGGED_SHARE`] of the checked requests were bursty.
    pub flagged: bool,
    /// The verdict in words: what was counted, and what a flag means.
    pub note: String,
}

impl Buffering {
    /// The verdict on `bursty` of `checked` requests, judged with reads of at least
    /// `burst_read` chunks; `None` when nothing was checked.
    pub fn of(bursty: u64, checked: u64, burst_read: u32) -> Option<Buffering> {
        if checked == 0 {
            return None;
        }
        let flagged = bursty as f64 >= FLAGGED_SHARE * checked as f64;
        let share = bursty as f64 * 100.0 / checked as f64;
        let rule = format!(
            "≥{:.0}% of their chunks in reads of ≥{burst_read} chunks, or a decode span under {:.0}% of the server-reported decode time",
            BURSTY_CHUNK_SHARE * 100.0,
            SPAN_SHARE * 100.0
        );
        let note = if flagged {
            format!(
                "{bursty} of {checked} answers ({share:.0}%) arrived in bursts ({rule}): a buffering proxy (e.g. nginx proxy_buffering on) or a server that batches its writes (no TCP_NODELAY) sits in the path; TTFT, ITL and TPOT measure the bursts, not the model's cadence"
            )
        } else {
            format!(
                "{bursty} of {checked} answers ({share:.0}%) arrived in bursts ({rule}); flagged at {:.0}%",
                FLAGGED_SHARE * 100.0
            )
        };
        Some(Buffering {
            bursty_requests: bursty,
            checked_requests: checked,
            flagged,
            note,
        })
    }
}

/// One warning per flagged cell: `TARGET × TRANSPORT: …`.
pub fn warnings(summary: &super::Summary) -> Vec<String> {
    summary
        .cells
        .iter()
        .filter_map(|c| {
            let b = c.buffering.as_ref().filter(|b| b.flagged)?;
            Some(format!("{} × {}: {}", c.target, c.transport, b.note))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{Chunk, OutcomeKind, ServerTiming};

    /// A successful request whose chunks arrived at `stamps` (ms).
    fn req(stamps: &[u64]) -> RequestRecord {
        RequestRecord {
            outcome: OutcomeKind::Ok,
            chunks: stamps
                .iter()
                .map(|&ms| Chunk {
                    at_ns: ms * 1_000_000,
                    tokens: 1,
                    text_bytes: 4,
                })
                .collect(),
            ..Default::default()
        }
    }

    /// `n` chunks `gap` ms apart.
    fn paced(n: u64, gap: u64) -> Vec<u64> {
        (0..n).map(|i| 100 + i * gap).collect()
    }

    #[test]
    fn a_paced_stream_is_not_bursty_even_with_some_coalesced_reads() {
        assert_eq!(classify(&req(&paced(40, 15)), 1), Some(false));
        // 10% of gaps are 0 (pairs read together), as on a busy simulator run.
        let mut s = paced(40, 15);
        for i in (0..40).step_by(10) {
            s[i + 1] = s[i];
        }
        assert_eq!(classify(&req(&s), 1), Some(false));
        // Even a few 4-chunk reads: 12 of 40 chunks (30%) in bursts.
        let mut s = paced(40, 15);
        for i in [0, 10, 20] {
            for j in 1..4 {
                s[i + j] = s[i];
            }
        }
        assert_eq!(classify(&req(&s), 1), Some(false));
    }

    #[test]
    fn a_buffered_stream_is_bursty() {
        // Everything in one read at the end.
        assert_eq!(classify(&req(&[900; 40]), 1), Some(true));
        // Bursts of 20 (a 4 KiB proxy buffer), the last one partial (6 chunks).
        let s: Vec<u64> = (0..46).map(|i| 100 + (i / 20) * 300).collect();
        assert_eq!(classify(&req(&s), 1), Some(true));
        // Exactly 75% in bursts: 6 chunks in one read, 2 alone.
        assert_eq!(classify(&req(&[5, 5, 5, 5, 5, 5, 7, 9]), 1), Some(true));
        assert_eq!(classify(&req(&[5, 5, 5, 5, 5, 6, 7, 9]), 1), Some(false));
    }

    #[test]
    fn short_and_failed_answers_are_not_checked() {
        assert_eq!(classify(&req(&[900; 7]), 1), None);
        let mut r = req(&[900; 40]);
        r.outcome = OutcomeKind::Timeout;
        assert_eq!(classify(&r, 1), None);
    }

    #[test]
    fn a_server_that_writes_in_groups_by_design_is_not_bursty() {
        // Groups of 4 chunks per write, paced: the server's own cadence.
        let s: Vec<u64> = (0..40).map(|i| 100 + (i / 4) * 20).collect();
        assert_eq!(
            classify(&req(&s), 1),
            Some(true),
            "unknown batching looks like a burst"
        );
        assert_eq!(burst_read_chunks(4), 8);
        assert_eq!(classify(&req(&s), 4), Some(false));
        // Two groups coalesced every time is still a burst for it.
        let s: Vec<u64> = (0..40).map(|i| 100 + (i / 8) * 20).collect();
        assert_eq!(classify(&req(&s), 4), Some(true));
    }

    #[test]
    fn with_server_timing_a_collapsed_span_is_bursty() {
        // 20 chunks 1 ms apart (every one its own read): 19 ms of span.
        let mut r = req(&paced(20, 1));
        r.server_timing = Some(ServerTiming {
            source: "llamacpp-timings".into(),
            ttft_ms: Some(10.0),
            total_ms: Some(410.0),
            ..Default::default()
        });
        // The server decoded for 400 ms; the client saw 19 ms of it.
        assert_eq!(classify(&r, 1), Some(true));
        // A server that decoded for 60 ms: 19 ms is 32%, not collapsed.
        r.server_timing.as_mut().unwrap().total_ms = Some(70.0);
        assert_eq!(classify(&r, 1), Some(false));
        // Too short a decode to judge.
        r.server_timing.as_mut().unwrap().total_ms = Some(25.0);
        assert!(!span_collapsed(&r));
        // Without `ttft_ms` there is no decode time.
        r.server_timing.as_mut().unwrap().ttft_ms = None;
        r.server_timing.as_mut().unwrap().total_ms = Some(410.0);
        assert!(!span_collapsed(&r));
    }

    #[test]
    fn a_cell_is_flagged_at_half_its_checked_requests() {
        assert_eq!(Buffering::of(0, 0, 4), None);
        let b = Buffering::of(5, 10, 4).unwrap();
        assert!(b.flagged);
        assert!(b.note.contains("5 of 10 answers (50%)"), "{}", b.note);
        assert!(b.note.contains("buffering proxy"), "{}", b.note);
        let b = Buffering::of(4, 10, 4).unwrap();
        assert!(!b.flagged);
        assert!(b.note.contains("flagged at 50%"), "{}", b.note);
    }
}
