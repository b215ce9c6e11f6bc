//! [`crate::Transport::Auto`]'s policy: which counts go to the staged slots.
//!
//! The mapped transport writes exactly the count's rows into pinned host memory, so it wins
//! wherever the count leaves most of the slot empty; one copy of the whole slot by the copy
//! engine moves bytes faster than the pack's mapped stores, so the staged transport wins where
//! the count nearly fills a large slot. An auto readback therefore keeps mapped slots for every
//! count, and staged slots beside them only where a count within the capacity can reach the
//! threshold; each enqueue goes to the set that the count it last read back chooses.
//!
//! The two thresholds come from the Rust harness's three committed runs at `b1e053b`
//! (`results/2026-12-04/harness-b1e053b/run-{1,2,3}/compare.json`, `realistic_sweep`: H200,
//! PCIe Gen5, a selecting producer, `f64` rows, p50 with the producer included). At a full
//! 1M-row slot (8 MiB) the mapped pack won in every run: 179.4, 175.7 and 179.1 µs against the
//! staged set's 185.5, 183.1 and 186.3, which took 3.4–4.2% longer (3.8–4.6% beyond the
//! producer). At a full 16M-row slot (128 MiB) staged won in every run: 2591.8, 2600.0 and
//! 2599.6 µs against 2642.8, 2653.2 and 2648.8, the producer alone taking 86.3, 86.4 and 85.6. So
//! [`STAGED_MIN_BYTES`] is 128 MiB, the smallest full slot at which staged won in every run.
//! Beyond the producer the mapped pack's time scales with the count and the whole-slot copy's
//! does not, so staged wins once the count fills (staged − producer) / (mapped − producer) of
//! the slot: 0.9800, 0.9793 and 0.9808 in the three runs. [`STAGED_MIN_FILL_PERMILLE`] is the
//! largest, rounded up, so that a count goes staged only where staged won in every run. Both
//! must hold. The harness's test `auto_policy_follows_the_committed_runs` recomputes both
//! from those files.

// The staged set copies the whole slot unless the readback's `staged_copy` says otherwise
// (`columns.rs`): at these fills the sized copy would take its top class, and the driver runs a
// SWITCH body's copy as a kernel, slower than the copy engine. In the same three runs the sized
// copy of a full 128 MiB slot took 2740.7, 2754.1 and 2747.9 µs p50 against the whole-slot
// copy's 2591.8, 2600.0 and 2599.6; traced on the H200 (`results/2026-12-04/python-trace-e02038c`),
// 8 MiB in 158.9 µs p50 by that kernel against 152.8 µs by the copy engine.

/// The fewest bytes of rows (count × row bytes) that go to the staged slots.
pub const STAGED_MIN_BYTES: usize = 128 << 20;
/// The least share of the capacity, in thousandths, that the count must fill to go to the
/// staged slots.
pub const STAGED_MIN_FILL_PERMILLE: usize = 981;

/// The count from which an auto readback of `capacity` rows of `row_bytes` bytes goes to the
/// staged slots; `None` where no count within the capacity does (then it makes none).
pub(crate) fn staged_from(capacity: usize, row_bytes: usize) -> Option<usize> {
    let by_bytes = STAGED_MIN_BYTES.div_ceil(row_bytes.max(1));
    // In u128: a capacity times 981 overflows usize above about 1.9e16 rows.
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
        // 16M f64 rows: 128 MiB, so only the full slot has the bytes (the fill alone would take
        // 16,458,449 rows).
        assert_eq!(staged_from(16 << 20, 8), Some(16 << 20));
        assert_eq!(staged_from((16 << 20) - 1, 8), None);
        // 32M f64 rows: the fill decides.
        assert_eq!(staged_from(32 << 20, 8), Some(32_916_898));
        // A slot smaller than 128 MiB has no count that reaches the staged slots: 1M and 2M
        // f64 rows, where the mapped pack won.
        assert_eq!(staged_from(1 << 20, 8), None);
        assert_eq!(staged_from(2 << 20, 8), None);
        // Wide rows reach the bytes with fewer rows; the fill still holds.
        assert_eq!(staged_from(1 << 19, 256), Some(1 << 19));
        assert_eq!(staged_from((1 << 19) - 1, 256), None);
        assert_eq!(staged_from(1 << 20, 256), Some(1_028_654));
        assert_eq!(staged_from(0, 8), None);
        // Capacities whose 981-fold overflows usize: still 0.981 of the capacity.
        let cap = 1usize << 60;
        assert_eq!(
            staged_from(cap, 8),
            Some((cap as u128 * 981).div_ceil(1000) as usize)
        );
        assert_eq!(staged_from(usize::MAX, 0).map(|f| f > 0), Some(true));
    }
}
