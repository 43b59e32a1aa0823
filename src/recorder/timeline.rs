//! The timeline sample: the full records of one measured session per cell, kept so a report
//! can draw "this conversation took 9 s over `ws` and 43 s over `http`" with every turn and
//! token arrival, without reading `requests.csv`/`chunks.csv` (which can hold millions of rows).
//!
//! Owns: which session is sampled (the first measured session whose first request reaches the
//! recorder) and the bounds that keep the sample small whatever the run size.
//! Does not own: files (`store` writes it to `timeline.json`) or drawing (`report`).

use serde::{Deserialize, Serialize};

use crate::vocab::{RequestRecord, SessionRecord};

/// At most this many requests are kept per cell; later ones set `truncated`.
pub const TIMELINE_MAX_REQUESTS: usize = 256;
/// At most this many chunks are kept per cell; requests past the budget keep their timestamps
/// but lose their chunk list, and set `truncated`.
pub const TIMELINE_MAX_CHUNKS: usize = 10_000;

/// One sampled session of one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionTimeline {
    /// Target name.
    pub target: String,
    /// Transport name.
    pub transport: String,
    /// Session index within the cell.
    pub session: u32,
    /// The session's requests in turn order, with their chunks (times are ns since run start).
    pub requests: Vec<RequestRecord>,
    /// The session's own record, once it has finished (start, end, failures).
    pub record: Option<SessionRecord>,
    /// True when a bound dropped requests or chunks from the sample.
    pub truncated: bool,
}

impl SessionTimeline {
    fn new(r: &RequestRecord) -> Self {
        SessionTimeline {
            target: r.target.clone(),
            transport: r.transport.as_str().to_string(),
            session: r.session,
            requests: Vec::new(),
            record: None,
            truncated: false,
        }
    }

    /// Adds a measured request of this session, within the bounds.
    pub(crate) fn push(&mut self, r: &RequestRecord) {
        if self.requests.len() >= TIMELINE_MAX_REQUESTS {
            self.truncated = true;
            return;
        }
        let kept: usize = self.requests.iter().map(|q| q.chunks.len()).sum();
        let mut r = r.clone();
        if kept + r.chunks.len() > TIMELINE_MAX_CHUNKS {
            r.chunks.clear();
            self.truncated = true;
        }
        // Keep turn order even when requests finish out of order.
        let at = self
            .requests
            .partition_point(|q| (q.turn, q.id) <= (r.turn, r.id));
        self.requests.insert(at, r);
    }

    /// Start of the sampled session, ns since run start: the session record's start, or the
    /// earliest intended start of its requests.
    pub fn start_ns(&self) -> Option<u64> {
        self.record
            .as_ref()
            .map(|s| s.start_ns)
            .or_else(|| self.requests.iter().map(|r| r.intended_ns).min())
    }

    /// End of the sampled session, ns since run start.
    pub fn end_ns(&self) -> Option<u64> {
        self.record.as_ref().map(|s| s.end_ns).or_else(|| {
            self.requests
                .iter()
                .filter_map(|r| r.end_ns.or(r.last_token_ns))
                .max()
        })
    }

    /// Chooses the session to sample in a cell from its first measured request.
    pub(crate) fn first_of(r: &RequestRecord) -> Self {
        Self::new(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::{CellKey, Recorder};
    use crate::vocab::Chunk;

    fn req(session: u32, turn: u32, chunks: usize) -> RequestRecord {
        RequestRecord {
            id: u64::from(session * 1000 + turn),
            target: "t".into(),
            transport: crate::vocab::TransportKind::Ws,
            session,
            turn,
            intended_ns: u64::from(turn) * 1_000,
            end_ns: Some(u64::from(turn) * 1_000 + 500),
            chunks: vec![
                Chunk {
                    at_ns: 1,
                    tokens: 1,
                    text_bytes: 1
                };
                chunks
            ],
            ..Default::default()
        }
    }

    #[test]
    fn keeps_one_session_in_turn_order_within_bounds() {
        let mut rec = Recorder::new();
        rec.add_request(&RequestRecord {
            warmup: true,
            ..req(0, 0, 3)
        });
        rec.add_request(&req(2, 1, 3));
        rec.add_request(&req(5, 0, 3)); // another session: not sampled
        rec.add_request(&req(2, 0, 3));
        rec.add_session(&SessionRecord {
            target: "t".into(),
            transport: crate::vocab::TransportKind::Ws,
            session: 2,
            start_ns: 0,
            end_ns: 1_700,
            requests: 2,
            ..Default::default()
        });
        let tl = rec.timeline(&CellKey::new("t", "ws")).unwrap();
        assert_eq!(tl.session, 2);
        let turns: Vec<u32> = tl.requests.iter().map(|r| r.turn).collect();
        assert_eq!(turns, vec![0, 1]);
        assert_eq!((tl.start_ns(), tl.end_ns()), (Some(0), Some(1_700)));
        assert!(!tl.truncated);

        let mut big = Recorder::new();
        for turn in 0..(TIMELINE_MAX_REQUESTS as u32 + 5) {
            big.add_request(&req(0, turn, 100));
        }
        let tl = big.timeline(&CellKey::new("t", "ws")).unwrap();
        assert!(tl.truncated);
        assert_eq!(tl.requests.len(), TIMELINE_MAX_REQUESTS);
        let chunks: usize = tl.requests.iter().map(|r| r.chunks.len()).sum();
        assert!(chunks <= TIMELINE_MAX_CHUNKS, "{chunks}");
        assert_eq!(chunks, TIMELINE_MAX_CHUNKS);
    }
}
