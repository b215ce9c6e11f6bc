//! [`crate::Transport::Auto`]'s policy: which counts go to the staged slots.
//!
//! The mapped transport writes exactly the count's rows into pinned host memory, so it wins
//! wherever the count leaves most of the slot empty; one copy of the whole slot by the copy
//! engine moves bytes faster than the pack's mapped stores, so the staged transport wins where
//! the count nearly fills a large slot. An auto readback therefore keeps mapped slots for every
//! count, and staged slots beside them only where a count within the capacity can reach the
//! threshold; each enqueue goes to the set that the count it last read back chooses.
//!
//! The two thresholds come from the committed run `results/2026-12-03/python-51a5d22`
//! (`bench.json`, H200, PCIe Gen5, PyTorch producer over a 1M-row `f64` slot, 8 MiB): beyond
//! the producer alone (75.2 µs p50), the mapped readback of the full slot took 228.3 µs and
//! the staged one 214.1 µs, 36.7 and 39.2 GB/s. Staged therefore wins once the count fills
//! 36.7 / 39.2 = 0.937 of the slot ([`STAGED_MIN_FILL_PERMILLE`]); the run measured it with
//! 8 MiB of rows and no fewer, which [`STAGED_MIN_BYTES`] keeps: both must hold. The
//! harness's test `auto_policy_follows_the_committed_run` recomputes both from that file.
//! (The Rust harness's trivial producer at `4a804c3` put mapped ahead at 8 MiB by 3% and
//! staged ahead at 128 MiB by 2%: where the producer leaves the slot's source in L2, the
//! mapped pack is faster, and the threshold errs towards it there by that much.)

// The run behind the thresholds ran its approaches in a fixed order that put the mapped
// readback after a pageable copy, which slows the next cycle's host work; shuffled
// (`results/2026-12-04/python-18439c4`), mapped matched the staged set at 8 MiB. The thresholds
// stand until they are measured again that way.
//
// The staged set copies the whole slot unless the readback's `staged_copy` says otherwise
// (`columns.rs`): at these fills the sized copy would take its top class, and the driver runs a
// SWITCH body's copy as a kernel, slower than the copy engine. Traced on the H200
// (`results/2026-12-04/python-trace-e02038c`): 8 MiB in 158.9 µs p50 by that kernel against
// 152.8 µs by the copy engine, in one run.

/// The fewest bytes of rows (count × row bytes) that go to the staged slots.
pub const STAGED_MIN_BYTES: usize = 8 << 20;
/// The least share of the capacity, in thousandths, that the count must fill to go to the
/// staged slots.
pub const STAGED_MIN_FILL_PERMILLE: usize = 937;

/// The count from which an auto readback of `capacity` rows of `row_bytes` bytes goes to the
/// staged slots; `None` where no count within the capacity does (then it makes none).
pub(crate) fn staged_from(capacity: usize, row_bytes: usize) -> Option<usize> {
    let by_bytes = STAGED_MIN_BYTES.div_ceil(row_bytes.max(1));
    // In u128: a capacity times 937 overflows usize above about 2e16 rows.
    let by_fill = (capacity as u128 * STAGED_MIN_FILL_PERMILLE as u128).div_ceil(1000);
    let by_fill = usize::try_from(by_fill).unwrap_or(usize::MAX);
    let from = by_bytes.max(by_fill).max(1);
    (from <= capacity).then_some(from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staged_slots_serve_nearly_full_large_slots_only() {
        // 1M f64 rows: 8 MiB, so only the full slot has the bytes (the fill alone would take
        // 982,516 rows).
        assert_eq!(staged_from(1 << 20, 8), Some(1 << 20));
        assert_eq!(staged_from(2 << 20, 8), Some(1_965_032));
        // A slot smaller than 8 MiB has no count that reaches the staged slots.
        assert_eq!(staged_from(1 << 19, 8), None);
        assert_eq!(staged_from((1 << 20) - 1, 8), None);
        // 16M f64 rows: the fill decides again.
        assert_eq!(staged_from(16 << 20, 8), Some(15_720_252));
        // Wide rows reach the bytes sooner; the fill still holds.
        assert_eq!(staged_from(1 << 16, 256), Some(61_408));
        assert_eq!(staged_from(0, 8), None);
        // Capacities whose 937-fold overflows usize: still 0.937 of the capacity.
        let cap = 1usize << 60;
        assert_eq!(
            staged_from(cap, 8),
            Some((cap as u128 * 937).div_ceil(1000) as usize)
        );
        assert_eq!(staged_from(usize::MAX, 0).map(|f| f > 0), Some(true));
    }
}
