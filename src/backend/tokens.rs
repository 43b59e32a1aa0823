//! Tokens per content chunk.
//!
//! Owns: splitting a response's output tokens over its content chunks, in this order of
//! preference: cumulative usage on every chunk (vLLM `continuous_usage_stats`), the final
//! server usage apportioned by text length (largest remainder, so the parts sum exactly to
//! the total), or one token per chunk (a lower bound, flagged as `chunk-count`).
//! Pure.

use crate::vocab::TokenSource;

/// One content chunk as decoded: its text length and any cumulative usage on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkInfo {
    /// UTF-8 bytes of the delta.
    pub text_bytes: u32,
    /// Cumulative output tokens reported on this chunk.
    pub cumulative: Option<u32>,
}

/// Per-chunk tokens, the output total and where it came from.
pub fn split(chunks: &[ChunkInfo], usage_output: Option<u32>) -> (Vec<u32>, u32, TokenSource) {
    if !chunks.is_empty() && chunks.iter().all(|c| c.cumulative.is_some()) {
        let mut prev = 0u32;
        let per: Vec<u32> = chunks
            .iter()
            .map(|c| {
                let cum = c.cumulative.unwrap_or(prev).max(prev);
                let t = cum - prev;
                prev = cum;
                t
            })
            .collect();
        return (
            per,
            usage_output.unwrap_or(prev).max(prev),
            TokenSource::ServerUsage,
        );
    }
    if let Some(total) = usage_output {
        return (apportion(chunks, total), total, TokenSource::ServerUsage);
    }
    (
        vec![1; chunks.len()],
        chunks.len() as u32,
        TokenSource::ChunkCount,
    )
}

/// Splits `total` over chunks in proportion to their text length (equal weights when all are
/// empty), largest remainder first, ties to the earlier chunk. Sums exactly to `total`.
pub fn apportion(chunks: &[ChunkInfo], total: u32) -> Vec<u32> {
    if chunks.is_empty() {
        return Vec::new();
    }
    let equal = chunks.iter().all(|c| c.text_bytes == 0);
    let weight = |c: &ChunkInfo| if equal { 1 } else { u64::from(c.text_bytes) };
    let sum: u64 = chunks.iter().map(weight).sum();
    let total = u64::from(total);
    let mut out = Vec::with_capacity(chunks.len());
    let mut given = 0u64;
    for c in chunks {
        let q = total * weight(c) / sum;
        out.push(q as u32);
        given += q;
    }
    // Fewer than one per chunk are left (the remainders sum to less than `sum` each).
    let extra = (total - given) as usize;
    if extra > 0 {
        let mut rems: Vec<(u64, usize)> = chunks
            .iter()
            .enumerate()
            .map(|(i, c)| (total * weight(c) % sum, i))
            .collect();
        let first = |a: &(u64, usize), b: &(u64, usize)| b.0.cmp(&a.0).then(a.1.cmp(&b.1));
        // Only which `extra` come first matters, not their order: no full sort.
        if extra < rems.len() {
            rems.select_nth_unstable_by(extra - 1, first);
        }
        for &(_, i) in &rems[..extra] {
            out[i] += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(b: u32) -> ChunkInfo {
        ChunkInfo {
            text_bytes: b,
            cumulative: None,
        }
    }

    /// The rule written plainly: every remainder sorted, the largest first.
    fn by_sorting(chunks: &[ChunkInfo], total: u32) -> Vec<u32> {
        let equal = chunks.iter().all(|c| c.text_bytes == 0);
        let w: Vec<u64> = chunks
            .iter()
            .map(|c| if equal { 1 } else { c.text_bytes as u64 })
            .collect();
        let sum: u64 = w.iter().sum();
        let mut out: Vec<u32> = w.iter().map(|w| (total as u64 * w / sum) as u32).collect();
        let mut rems: Vec<(u64, usize)> = w
            .iter()
            .enumerate()
            .map(|(i, w)| (total as u64 * w % sum, i))
            .collect();
        rems.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let left = total - out.iter().sum::<u32>();
        for &(_, i) in rems.iter().take(left as usize) {
            out[i] += 1;
        }
        out
    }

    #[test]
    fn apportions_by_length_and_sums_exactly() {
        assert_eq!(apportion(&[c(3), c(3), c(3)], 10), vec![4, 3, 3]);
        assert_eq!(apportion(&[c(1), c(9)], 5), vec![1, 4]);
        assert_eq!(apportion(&[c(0), c(0)], 3), vec![2, 1]);
        let mut rng = crate::rng::Rng::new(3);
        for _ in 0..200 {
            let n = rng.below(20) as usize + 1;
            let chunks: Vec<_> = (0..n).map(|_| c(rng.below(12) as u32)).collect();
            let total = rng.below(500) as u32;
            let got = apportion(&chunks, total);
            assert_eq!(got.iter().sum::<u32>(), total);
            assert_eq!(got, by_sorting(&chunks, total), "{chunks:?} {total}");
        }
    }

    #[test]
    fn prefers_cumulative_then_usage_then_chunk_count() {
        let cum = [
            ChunkInfo {
                text_bytes: 2,
                cumulative: Some(1),
            },
            ChunkInfo {
                text_bytes: 2,
                cumulative: Some(3),
            },
            ChunkInfo {
                text_bytes: 2,
                cumulative: Some(4),
            },
        ];
        assert_eq!(
            split(&cum, Some(5)),
            (vec![1, 2, 1], 5, TokenSource::ServerUsage)
        );
        assert_eq!(
            split(&[c(4), c(4)], Some(6)),
            (vec![3, 3], 6, TokenSource::ServerUsage)
        );
        assert_eq!(
            split(&[c(4), c(4)], None),
            (vec![1, 1], 2, TokenSource::ChunkCount)
        );
        assert_eq!(split(&[], Some(0)), (vec![], 0, TokenSource::ServerUsage));
    }
}
