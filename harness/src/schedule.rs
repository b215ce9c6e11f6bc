//! The order of cycles in the latency sweeps, chosen so that no approach's measurement
//! depends on which approach ran before it.
//!
//! A repetition runs every approach once, in an order of its own (a seeded shuffle, the same
//! in every run), and each approach as a pair of cycles: an untimed settle cycle, then the
//! timed one. The settle cycle runs the approach's whole readback (its launches, copies and
//! wait) but neither records it nor reads its data on the host; the timed cycle right after
//! it is measured and checked in full. So a timed cycle always follows a cycle of its own
//! approach, as each iteration of the criterion bench follows the one before, and whatever an
//! approach leaves behind (the 128 MiB copy of over_copy or of the staged readback at
//! capacity 16M, a worker thread's wake-up) falls on the next approach's settle cycle, a
//! different approach in each repetition.
//!
//! With one fixed order, the oracle always ran right after over_copy, and measured 18.13 µs
//! against the criterion way's 13.10 at capacity 16M, n = 4096, and 14.84-14.91 against
//! 13.24-13.33 at capacity 1M, n = 1..256; `oracle_after_host_read`, the same single timed
//! cycle but run right after the criterion way's batch of oracles, measured 13.05-13.15 there
//! (run `bd0c3a9`, results/2026-12-02/harness-bd0c3a9).
//!
//! The command line can change the schedule for A/B checks: `--settle N` settle cycles (0:
//! none), `--fixed-order` the table order every repetition; `--settle 0 --fixed-order` is the
//! schedule of the runs before this one.

/// How a sweep orders its cycles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// Untimed settle cycles before each timed cycle (1 by default; 0 measures each approach
    /// right after whatever ran before it).
    pub settle: usize,
    /// Whether each repetition shuffles the approaches (by default); else they run in table
    /// order, always after the same one.
    pub shuffle: bool,
}

impl Default for Schedule {
    fn default() -> Self {
        Schedule {
            settle: 1,
            shuffle: true,
        }
    }
}

impl Schedule {
    /// The order of `len` approaches in the repetition of `seed`.
    pub fn order(self, len: usize, seed: u64) -> Vec<usize> {
        if self.shuffle {
            order(len, seed)
        } else {
            (0..len).collect()
        }
    }
}

/// A permutation of `0..len`, the same for the same `seed`: the order of the approaches in
/// one repetition.
pub fn order(len: usize, seed: u64) -> Vec<usize> {
    let mut state = seed;
    let mut v: Vec<usize> = (0..len).collect();
    // Fisher-Yates over splitmix64 (the modulo's bias is below 1e-17 for these lengths).
    for i in (1..len).rev() {
        let j = (splitmix64(&mut state) % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// The seed of repetition `k` at the `point`-th point of a sweep.
pub fn seed(point: usize, k: u64) -> u64 {
    ((point as u64) << 32) ^ k
}

/// splitmix64's next value (Steele, Lea and Flood's generator, as in `java.util.SplittableRandom`).
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_order_is_kept_on_request() {
        let fixed = Schedule {
            settle: 0,
            shuffle: false,
        };
        assert_eq!(fixed.order(4, 99), vec![0, 1, 2, 3]);
        assert_eq!(Schedule::default().order(13, 99), order(13, 99));
    }

    #[test]
    fn each_order_is_a_permutation_and_reproducible() {
        for len in [1, 2, 7, 13, 14] {
            for k in 0..50 {
                let mut o = order(len, seed(3, k));
                assert_eq!(o, order(len, seed(3, k)));
                o.sort_unstable();
                assert_eq!(o, (0..len).collect::<Vec<_>>());
            }
        }
        assert_ne!(order(13, seed(0, 1)), order(13, seed(0, 2)));
        assert_ne!(order(13, seed(0, 1)), order(13, seed(1, 1)));
    }

    #[test]
    fn no_approach_follows_the_same_one_systematically() {
        // 13 approaches (the main sweep), 1000 repetitions (its default at n <= 64K): how
        // often each approach runs right after each other one, or first.
        let len = 13;
        let reps = 1000;
        let mut after = vec![vec![0u32; len + 1]; len];
        for k in 0..reps {
            let o = order(len, seed(0, k));
            after[o[0]][len] += 1;
            for w in o.windows(2) {
                after[w[1]][w[0]] += 1;
            }
        }
        // Each of the 13 predecessors (12 others, or none) is expected 1000 / 13 = 77 times:
        // a fixed order would give 1000 for one of them and 0 for the rest.
        for (y, row) in after.iter().enumerate() {
            for (x, &c) in row.iter().enumerate() {
                if x != y {
                    assert!((40..=120).contains(&c), "{x} before {y}: {c} times");
                }
            }
        }
    }
}
