//! The sweep's summaries over its points: the bandwidth at 16M and the enqueue's host cost at
//! small n, per approach.
use super::Approach;
use crate::data::{self, Point, M};
use crate::stats::Summary;
use std::collections::BTreeMap;

/// The counts of the small-n targets and host costs (at capacity 1M).
pub const SMALL_NS: [usize; 4] = [1, 16, 256, 4096];

/// Bandwidth at n = 16M (capacity 16M) of every approach that reads back and was measured
/// (not skipped), GB/s by name.
pub fn bandwidth_16m(points: &[Point]) -> BTreeMap<&'static str, f64> {
    Approach::ALL
        .iter()
        .filter(|a| a.reads_back())
        .filter_map(|a| data::at(points, 16 * M, 16 * M, a.name()).map(|x| (a.name(), x)))
        .filter(|(_, x)| x.measured())
        .map(|(a, x)| (a, x.gbps))
        .collect()
}

/// Host cost of the enqueue at small n: for every approach that reads back, the summary of
/// its enqueue p50s over n = 1..4096 at capacity 1M (none, `samples` 0, for one skipped).
pub fn enqueue_cost_small_n(points: &[Point]) -> BTreeMap<&'static str, Summary> {
    Approach::ALL
        .iter()
        .filter(|a| a.reads_back())
        .map(|a| {
            let v: Vec<f64> = SMALL_NS
                .iter()
                .filter_map(|&n| data::at(points, M, n, a.name()))
                .filter(|x| x.measured())
                .map(|x| x.enqueue_us.p50)
                .collect();
            (a.name(), Summary::of(&v))
        })
        .collect()
}
