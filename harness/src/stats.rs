//! Order statistics of timing samples.
use serde::Serialize;

/// Summary of one set of samples (microseconds unless the field says otherwise).
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct Summary {
    /// Samples.
    pub samples: usize,
    /// Median.
    pub p50: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Mean.
    pub mean: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl Summary {
    /// Summarizes `xs` (any order). Empty input gives all zeros.
    pub fn of(xs: &[f64]) -> Summary {
        if xs.is_empty() {
            return Summary::default();
        }
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        Summary {
            samples: v.len(),
            p50: percentile(&v, 0.50),
            p99: percentile(&v, 0.99),
            mean: v.iter().sum::<f64>() / v.len() as f64,
            min: v[0],
            max: v[v.len() - 1],
        }
    }
}

/// Nearest-rank percentile of sorted data (`q` in 0..=1); the median of an even count is the
/// mean of the two middle values.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return 0.0;
    }
    if q == 0.5 {
        return if n % 2 == 1 {
            sorted[n / 2]
        } else {
            0.5 * (sorted[n / 2 - 1] + sorted[n / 2])
        };
    }
    let rank = (q * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_p99() {
        let xs: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let s = Summary::of(&xs);
        assert_eq!(s.p50, 50.5);
        assert_eq!(s.p99, 99.0);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 100.0);
        assert_eq!(Summary::of(&[3.0, 1.0, 2.0]).p50, 2.0);
    }
}
