//! A cell's busy time: the length of the union of its measured requests' intervals
//! `[intended start, end]`, in bounded memory, for `aggregate_output_tok_s` over the time the
//! cell itself was working (under the interleaved schedule the cells take turns, so the
//! run's whole span would halve each cell's rate).
//!
//! Owns: the streaming interval union and its bound. Pure.
//! Does not own: which requests count (see `histograms`) or the rate (see `summary`).
//!
//! Records arrive in completion order, not start order, so the union keeps a sorted list of
//! disjoint open intervals and merges each new one into it. When the list grows past
//! [`BUSY_INTERVALS_KEPT`], its earliest interval is closed: its length moves into a total and
//! everything before its end is taken as accounted for (a later interval is clipped to start
//! there). That is exact unless a request still in flight when the cell had already gone idle
//! and busy again [`BUSY_INTERVALS_KEPT`] times arrives afterwards; then the idle gaps inside
//! that request's span that were already closed are missed (an undercount of busy time,
//! never an overcount).

/// Disjoint intervals kept open per cell (16 bytes each: 16 KiB per cell at most).
pub const BUSY_INTERVALS_KEPT: usize = 1024;

/// The streaming union of `[start, end]` intervals (ns).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BusyTime {
    /// Disjoint, sorted by start, none touching another.
    open: Vec<(u64, u64)>,
    /// Length of the intervals closed so far, ns.
    closed_ns: u64,
    /// End of the last closed interval: time before it is accounted for.
    closed_until: Option<u64>,
}

impl BusyTime {
    /// Adds `[start, end]` (an empty or inverted interval adds nothing).
    pub fn add(&mut self, start: u64, end: u64) {
        let start = self.closed_until.map_or(start, |c| start.max(c));
        if end <= start {
            return;
        }
        // The intervals overlapping or touching [start, end] form one run in the sorted list.
        let first = self.open.partition_point(|&(_, e)| e < start);
        let last = self.open.partition_point(|&(s, _)| s <= end);
        let (mut s, mut e) = (start, end);
        if first < last {
            s = s.min(self.open[first].0);
            e = e.max(self.open[last - 1].1);
        }
        self.open.splice(first..last, [(s, e)]);
        if self.open.len() > BUSY_INTERVALS_KEPT {
            let (s, e) = self.open.remove(0);
            self.closed_ns += e - s;
            self.closed_until = Some(e);
        }
    }

    /// Adds every open interval of `other`, and its closed length as it is (merging
    /// recorders: an overlap with `other`'s closed part is counted twice).
    pub fn merge(&mut self, other: &BusyTime) {
        self.closed_ns += other.closed_ns;
        for &(s, e) in &other.open {
            self.add(s, e);
        }
    }

    /// The union's length, ns.
    pub fn total_ns(&self) -> u64 {
        self.closed_ns + self.open.iter().map(|(s, e)| e - s).sum::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_in_any_order() {
        let mut b = BusyTime::default();
        // Out of order, overlapping, touching, contained, disjoint.
        for (s, e) in [
            (50, 60),
            (0, 10),
            (5, 20),
            (20, 30),
            (100, 110),
            (52, 55),
            (40, 51),
        ] {
            b.add(s, e);
        }
        // [0,30] + [40,60] + [100,110] = 30 + 20 + 10.
        assert_eq!(b.total_ns(), 60);
        b.add(25, 105); // bridges everything: [0,110]
        assert_eq!(b.total_ns(), 110);
        assert_eq!(b.open.len(), 1);
        b.add(7, 7);
        assert_eq!(b.total_ns(), 110);
    }

    #[test]
    fn bounded_and_exact_in_order() {
        let mut b = BusyTime::default();
        let n = 3 * BUSY_INTERVALS_KEPT as u64;
        for i in 0..n {
            // Two overlapping requests per slot of 100 ns, 40 ns of idle between slots.
            b.add(i * 100, i * 100 + 50);
            b.add(i * 100 + 10, i * 100 + 60);
        }
        assert!(b.open.len() <= BUSY_INTERVALS_KEPT);
        assert_eq!(b.total_ns(), n * 60);
        let mut m = BusyTime::default();
        m.merge(&b);
        assert_eq!(m.total_ns(), b.total_ns());
    }
}
