//! The host's rows: what the test kernels append for (n, count, seed), and a readout's rows,
//! both sorted, to compare as multisets.
use anyhow::Result;
use sized_readback::testing::pattern;
use sized_readback::{ColumnReadout, ColumnSchema};

/// A prime above every candidate count: `i -> i * P % n` permutes `0..n`.
pub(super) const P: u64 = 2_147_483_647;

/// The bytes of column `c` of row `i` for `seed`, `size` bytes (csrc/testing/append.cu's
/// srbt_value).
pub(super) fn value(seed: u64, i: u64, c: u64, size: usize) -> Vec<u8> {
    let mut w = pattern::mix(seed.wrapping_add(8 * i + c))
        .to_le_bytes()
        .to_vec();
    w.extend(pattern::mix(seed.wrapping_add(8 * i + c + 0x100_0000)).to_le_bytes());
    w.truncate(size);
    w
}

/// The rows the kernel keeps for (n, count, seed): candidate i iff i * P % n < count; each
/// row the concatenated bytes of its columns.
pub(super) fn expected_rows(n: u64, count: u64, seed: u64, sizes: &[usize]) -> Vec<Vec<u8>> {
    let mut rows: Vec<Vec<u8>> = (0..n)
        .filter(|&i| (i as u128 * P as u128 % n as u128) < count as u128)
        .map(|i| {
            sizes
                .iter()
                .enumerate()
                .flat_map(|(c, &s)| value(seed, i, c as u64, s))
                .collect()
        })
        .collect();
    rows.sort_unstable();
    rows
}

/// The rows of a readout, each the concatenated bytes of its columns, sorted.
pub(super) fn rows_of(out: &ColumnReadout<'_>, sizes: &[usize]) -> Result<Vec<Vec<u8>>> {
    let cols: Vec<&[u8]> = (0..sizes.len())
        .map(|c| out.column_bytes(c))
        .collect::<sized_readback::Result<_>>()?;
    let mut rows: Vec<Vec<u8>> = (0..out.count())
        .map(|r| {
            cols.iter()
                .zip(sizes)
                .flat_map(|(col, &s)| col[r * s..(r + 1) * s].to_vec())
                .collect()
        })
        .collect();
    rows.sort_unstable();
    Ok(rows)
}

pub(super) fn schema_of(sizes: &[usize]) -> ColumnSchema {
    let mut s = ColumnSchema::new();
    for &size in sizes {
        s.raw_column(size);
    }
    s
}
