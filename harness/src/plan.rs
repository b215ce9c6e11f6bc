//! What to measure: the command line, and the points, cycles and repetitions it implies.
use crate::data::M;
use crate::schedule::Schedule;
use clap::Parser;
use std::path::PathBuf;

/// Compares every readback approach on this GPU and checks the crate's speed targets.
#[derive(Debug, Parser)]
#[command(version)]
pub struct Args {
    /// Directory for compare.json, latency.svg and table.txt.
    #[arg(long, default_value = "target/compare")]
    pub out: PathBuf,
    /// Timed cycles per approach at each point with n <= 64K (fewer at larger n).
    #[arg(long, default_value_t = 1000)]
    pub reps: usize,
    /// A fifth of the cycles (a quick look; p99 is then rough).
    #[arg(long)]
    pub quick: bool,
    /// Add more points to the sweep (every power of 4 from 1 to 16M at capacity 16M).
    #[arg(long)]
    pub extended: bool,
    /// Cycles of each seed-loop measurement with ~200 µs kernels (10x that with ~20 µs).
    #[arg(long, default_value_t = 600)]
    pub loop_cycles: u64,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Untimed settle cycles of an approach before each of its timed cycles in the latency
    /// sweeps (0: measure each right after whatever ran before it; for A/B checks).
    #[arg(long, default_value_t = 1)]
    pub settle: usize,
    /// Run the approaches in table order in every repetition instead of a shuffled order (with
    /// `--settle 0`, the sweeps' schedule before the settle cycles; for A/B checks).
    #[arg(long)]
    pub fixed_order: bool,
}

/// The capacities of the sweeps (elements per slot / copy-based capacity).
pub const CAPACITIES: [usize; 2] = [M, 16 * M];

impl Args {
    /// How the latency sweeps order their cycles.
    pub fn schedule(&self) -> Schedule {
        Schedule {
            settle: self.settle,
            shuffle: !self.fixed_order,
        }
    }

    /// Timed cycles per approach at a point with n <= 64K.
    pub fn reps(&self) -> usize {
        if self.quick {
            (self.reps / 5).max(20)
        } else {
            self.reps.max(10)
        }
    }

    /// Timed cycles per approach at a point of count `n` (fewer where a cycle is long).
    pub fn reps_at(&self, n: usize) -> usize {
        let reps = self.reps();
        if n <= 64 * 1024 {
            reps
        } else if n <= M {
            (reps / 8).max(10)
        } else {
            (reps / 30).max(8)
        }
    }

    /// The main sweep's (capacity, n): 1 to 1M at capacity 1M, 4K to 16M at capacity 16M
    /// (every power of 4 there with `--extended`).
    pub fn sweep_points(&self) -> Vec<(usize, usize)> {
        let mut plan: Vec<(usize, usize)> = [1, 16, 256, 4096, 65536, M]
            .iter()
            .map(|&n| (M, n))
            .collect();
        let big: Vec<usize> = if self.extended {
            (0..=12).map(|k| 1usize << (2 * k)).collect()
        } else {
            vec![4096, 65536, M, 16 * M]
        };
        plan.extend(big.iter().map(|&n| (16 * M, n)));
        plan
    }

    /// The realistic sweep's (capacity, candidates, selected): n of 1M, and all of 16M.
    pub fn realistic_points(&self) -> Vec<(usize, u64, u64)> {
        let mut plan: Vec<(usize, u64, u64)> = [1u64, 16, 256, 4096, 65536, M as u64]
            .iter()
            .map(|&n| (M, M as u64, n))
            .collect();
        plan.push((16 * M, 16 * M as u64, 16 * M as u64));
        plan
    }

    /// The grid probe's counts and grid caps, for a GPU of `sms` multiprocessors.
    pub fn probe_points(&self, sms: u32) -> Vec<(usize, Vec<u32>)> {
        vec![
            // Up to 32 KiB one block works whatever the grid: these rows show the launch size.
            (4096usize, vec![1u32, 8]),
            // 64 KiB: the grid cap sets the working blocks (1 block vs several).
            (8192, vec![1, 2, 4, 16]),
            (65536, vec![4, 16, 32, 64, 128]),
            (M, vec![sms / 2, sms, 2 * sms, 4 * sms, 8 * sms]),
            (16 * M, vec![sms, 2 * sms, 4 * sms, 8 * sms, 16 * sms]),
        ]
    }

    /// Timed launches per grid cap of the probe at count `n`.
    pub fn probe_reps(&self, n: usize) -> usize {
        let reps = if self.quick { 20 } else { 100 };
        if n >= M {
            reps / 5
        } else {
            reps
        }
    }

    /// Timed rounds of the enqueue cost breakdown.
    pub fn cost_reps(&self) -> usize {
        if self.quick {
            100
        } else {
            400
        }
    }

    /// Timed loops per way of the sized step (64 steps each).
    pub fn sized_step_repeats(&self) -> usize {
        if self.quick {
            6
        } else {
            30
        }
    }

    /// The sized step's capacities.
    pub const SIZED_STEP_CAPACITIES: [u64; 2] = [1 << 14, 1 << 20];

    /// Timed appends of the append host cost.
    pub fn append_reps(&self) -> usize {
        if self.quick {
            200
        } else {
            1000
        }
    }

    /// The seed loop's (kernel µs, CPU µs) ratios.
    pub const LOOP_RATIOS: [(f64, f64); 3] = [(200.0, 5.0), (20.0, 2.0), (200.0, 200.0)];

    /// The seed loop's rounds per ratio (the approaches take turns round by round).
    pub const LOOP_ROUNDS: u64 = 4;

    /// Cycles of one seed-loop measurement with kernels of `kernel_us`.
    pub fn loop_cycles(&self, kernel_us: f64) -> u64 {
        let cycles = if kernel_us < 100.0 {
            self.loop_cycles * 10
        } else {
            self.loop_cycles
        };
        if self.quick { cycles / 4 } else { cycles }.max(Self::LOOP_ROUNDS * 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_plan() {
        let a = Args::parse_from(["compare"]);
        assert_eq!(a.reps(), 1000);
        assert_eq!(
            (a.reps_at(65536), a.reps_at(M), a.reps_at(16 * M)),
            (1000, 125, 33)
        );
        assert_eq!(a.sweep_points().len(), 10);
        assert!(a.sweep_points().contains(&(16 * M, 4096)));
        assert_eq!(a.realistic_points().len(), 7);
        assert_eq!(a.schedule(), Schedule::default());
        let ab = Args::parse_from(["compare", "--settle", "0", "--fixed-order"]);
        assert_eq!((ab.schedule().settle, ab.schedule().shuffle), (0, false));
        let q = Args::parse_from(["compare", "--quick", "--extended"]);
        assert_eq!(q.reps(), 200);
        assert_eq!(q.sweep_points().len(), 6 + 13);
        assert_eq!(q.loop_cycles(20.0), 1500);
    }
}
