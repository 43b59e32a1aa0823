//! The server's prefix cache, by choice ([`CacheMode`](crate::vocab::CacheMode)): `cold` (every request's prompt starts with a salt
//! no other request of the run has), `warm` (the prompts are sent once, untimed, before the
//! measured sessions) or `as-is` (the scenario verbatim).
//!
//! The salt is [`SALT_WORDS`] words from [`WORDS`] (64 common four-letter English words, each
//! a single token in the common BPE vocabularies), separated by single spaces and followed
//! by a blank line: always [`SALT_BYTES`] bytes, so every request of every cell carries the
//! same extra length and token count and transports stay comparable. It goes first in the
//! system prompt / `instructions`, the first thing a prefix cache sees.
//!
//! The words spell a 60-bit number: (cell, session, turn, step, WebSocket warm-up) packed
//! without overlap, then passed through a bijection keyed by the run's salt key. Distinct
//! requests of a run therefore always get distinct salts (not merely probably), and a new
//! run (new key) gets new ones.
//!
//! Pure: no I/O, no clock.

/// The salt's words: 64 common four-letter English words (each one token, with or without
/// a leading space, in GPT-style and Llama-3-style BPE vocabularies).
pub const WORDS: [&str; 64] = [
    "time", "year", "work", "back", "life", "hand", "part", "case", "week", "fact", "home", "game",
    "book", "word", "side", "kind", "head", "line", "name", "city", "team", "door", "face", "food",
    "land", "body", "love", "road", "tree", "ship", "bird", "fish", "milk", "rain", "snow", "wind",
    "gold", "blue", "rock", "king", "hill", "farm", "park", "wall", "ball", "card", "star", "moon",
    "song", "film", "idea", "club", "desk", "lake", "town", "wood", "coat", "boat", "cake", "bank",
    "bell", "seat", "sand", "rice",
];

/// Words in a salt (6 bits each: 60 bits).
pub const SALT_WORDS: usize = 10;

/// Bytes of a salt: ten four-letter words, nine spaces, a blank line.
pub const SALT_BYTES: usize = SALT_WORDS * 4 + (SALT_WORDS - 1) + 2;

/// The salt's form in words, for the manifest and the documentation.
pub const SALT_FORM: &str = "10 words from a fixed list of 64 common four-letter English words, separated by single spaces, then a blank line (51 bytes, about 11 tokens), first in the system prompt / instructions; the words encode the run's salt key, cell, session, turn and step through a bijection, so no two requests of a run share a salt";

// Bit widths of the packed request coordinates (60 bits in all).
const CELL_BITS: u32 = 10;
const SESSION_BITS: u32 = 18;
const TURN_BITS: u32 = 20;
const STEP_BITS: u32 = 11;
const MASK: u64 = (1 << 60) - 1;

/// Largest cell count, session index, expanded turn count and requests per turn for which
/// salts are guaranteed distinct (checked by the plan builder for `cold` cells).
pub const LIMITS: (u64, u64, u64, u64) = (
    1 << CELL_BITS,
    1 << SESSION_BITS,
    1 << TURN_BITS,
    1 << STEP_BITS,
);

/// Where in a session a request is: what the salt is drawn from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestPos {
    /// Cell index in the plan.
    pub cell: u32,
    /// Session index.
    pub session: u32,
    /// Turn (expanded) index.
    pub turn: u32,
    /// Request within the turn.
    pub step: u32,
    /// A WebSocket `generate:false` warm-up (shares turn and step with the request after it).
    pub ws_warmup: bool,
}

/// The salt of one request: [`SALT_BYTES`] bytes, ending in a blank line.
pub fn salt(key: u64, pos: RequestPos) -> String {
    let packed = (u64::from(pos.cell) & ((1 << CELL_BITS) - 1))
        | (u64::from(pos.session) & ((1 << SESSION_BITS) - 1)) << CELL_BITS
        | (u64::from(pos.turn) & ((1 << TURN_BITS) - 1)) << (CELL_BITS + SESSION_BITS)
        | (u64::from(pos.step) & ((1 << STEP_BITS) - 1)) << (CELL_BITS + SESSION_BITS + TURN_BITS)
        | u64::from(pos.ws_warmup) << (CELL_BITS + SESSION_BITS + TURN_BITS + STEP_BITS);
    let mut x = mix(key, packed);
    let mut out = String::with_capacity(SALT_BYTES);
    for i in 0..SALT_WORDS {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(WORDS[(x & 63) as usize]);
        x >>= 6;
    }
    out.push_str("\n\n");
    out
}

/// The system prompt with the salt in front.
pub fn salted(key: u64, pos: RequestPos, system: &str) -> String {
    let mut s = salt(key, pos);
    s.push_str(system);
    s
}

/// A bijection of 60-bit numbers, keyed: xor, odd multiplications and right xor-shifts,
/// each invertible modulo 2^60.
fn mix(key: u64, v: u64) -> u64 {
    let k = crate::rng::Rng::derive(key, 0x5a17).next_u64();
    let mut x = (v ^ k) & MASK;
    x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15) & MASK;
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9) & MASK;
    x ^= x >> 31;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB) & MASK;
    x ^= x >> 30;
    (x.wrapping_add(k >> 4)) & MASK
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn pos(cell: u32, session: u32, turn: u32, step: u32) -> RequestPos {
        RequestPos {
            cell,
            session,
            turn,
            step,
            ws_warmup: false,
        }
    }

    #[test]
    fn words_are_distinct_four_letter_words() {
        let set: HashSet<&str> = WORDS.iter().copied().collect();
        assert_eq!(set.len(), 64);
        assert!(WORDS
            .iter()
            .all(|w| w.len() == 4 && w.bytes().all(|b| b.is_ascii_lowercase())));
    }

    #[test]
    fn salt_is_deterministic_and_keyed() {
        let p = pos(1, 2, 3, 4);
        assert_eq!(salt(7, p), salt(7, p));
        assert_ne!(salt(7, p), salt(8, p));
        assert!(salted(7, p, "You are helpful.").ends_with("\n\nYou are helpful."));
    }

    #[test]
    fn salts_have_one_length_and_word_count_and_are_unique() {
        let mut seen = HashSet::new();
        for key in [0u64, 1, 0xdead_beef] {
            seen.clear();
            for cell in 0..4 {
                for session in 0..20 {
                    for turn in 0..12 {
                        for step in 0..6 {
                            for ws_warmup in [false, true] {
                                let s = salt(
                                    key,
                                    RequestPos {
                                        cell,
                                        session,
                                        turn,
                                        step,
                                        ws_warmup,
                                    },
                                );
                                assert_eq!(s.len(), SALT_BYTES, "{s:?}");
                                assert!(s.ends_with("\n\n"));
                                let words: Vec<&str> = s.trim_end().split(' ').collect();
                                assert_eq!(words.len(), SALT_WORDS);
                                assert!(words.iter().all(|w| WORDS.contains(w)));
                                assert!(seen.insert(s), "duplicate salt");
                            }
                        }
                    }
                }
            }
        }
        // The largest coordinates still fit without overlap.
        let (c, s, t, st) = LIMITS;
        let a = salt(
            1,
            pos(c as u32 - 1, s as u32 - 1, t as u32 - 1, st as u32 - 1),
        );
        let b = salt(
            1,
            pos(c as u32 - 1, s as u32 - 1, t as u32 - 1, st as u32 - 2),
        );
        assert_ne!(a, b);
    }

    #[test]
    fn mix_is_a_bijection_on_a_sample() {
        // Distinct inputs never collide (checked densely on a contiguous range).
        let outs: HashSet<u64> = (0..200_000u64).map(|v| mix(42, v)).collect();
        assert_eq!(outs.len(), 200_000);
        assert!(outs.iter().all(|x| *x <= MASK));
    }
}
