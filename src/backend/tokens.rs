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
    let weights: Vec<u64> = if chunks.iter().all(|c| c.text_bytes == 0) {
        vec![1; chunks.len()]
    } else {
        chunks.iter().map(|c| c.text_bytes as u64).collect()
    };
    let sum: u64 = weights.iter().sum();
    let mut out = Vec::with_capacity(chunks.len());
    let mut rems = Vec::with_capacity(chunks.len());
    let mut given = 0u64;
    for (i, w) in weights.iter().enumerate() {
        let exact = total as u64 * w;
        let q = exact / sum;
        out.push(q as u32);
        rems.push((exact % sum, i));
        given += q;
    }
    rems.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in rems.iter().take((total as u64 - given) as usize) {
        out[i] += 1;
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
            assert_eq!(apportion(&chunks, total).iter().sum::<u32>(), total);
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
