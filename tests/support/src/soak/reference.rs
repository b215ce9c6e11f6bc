//! The host reference: the seeded random stream, the count values a lane's table holds, the
//! outcome a stored count must give, and the check of a wait's result against it.
use anyhow::Result;
use sized_readback::testing::pattern;
use sized_readback::{CountKind, Element, Error, Readout};

/// SplitMix64 stream: reproducible, no dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A stream from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        pattern::mix(self.0)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// One of `items`.
    pub fn pick<'a, X>(&mut self, items: &'a [X]) -> &'a X {
        &items[self.below(items.len() as u64) as usize]
    }
    /// True with probability 1/n.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// The outcome the host reference predicts for one readback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// `n` elements, equal to the source's bytes.
    Data(usize),
    /// `Error::NegativeCount { count }`.
    Negative(i64),
    /// `Error::CountExceedsCapacity { count, capacity }`.
    OverCapacity(u64, usize),
    /// `Error::CountExceedsSource { count, column: 0, source_len }`.
    OverSource(u64, usize),
}

/// What the pack kernel must report for the count `value` (stored as `kind`), a slot of
/// `capacity` and a source of `source_len` elements: the host reference.
pub fn expected(kind: CountKind, value: i64, capacity: usize, source_len: usize) -> Expected {
    // The kind's size() low bytes of `value`, read as the kind's signedness says.
    let shift = 64 - 8 * kind.size() as u32;
    let n: u64 = if kind.is_signed() {
        let v = (value << shift) >> shift;
        if v < 0 {
            return Expected::Negative(v);
        }
        v as u64
    } else {
        ((value as u64) << shift) >> shift
    };
    if n > capacity as u64 {
        Expected::OverCapacity(n, capacity)
    } else if n > source_len as u64 {
        Expected::OverSource(n, source_len)
    } else {
        Expected::Data(n as usize)
    }
}

/// Random count values for a slot of `cap` elements: the edges and random ones.
pub fn count_values(rng: &mut Rng, cap: usize, n: usize) -> Vec<i64> {
    let cap = cap as i64;
    (0..n)
        .map(|_| match rng.below(16) {
            0 => 0,
            1 => 1,
            2 => cap,
            3 => cap + 1,
            4 => cap - 1,
            5 => -1,
            6 => -(rng.below(1 << 40) as i64) - 1,
            7 => *rng.pick(&[i32::MIN as i64, i64::MIN, i32::MAX as i64, u32::MAX as i64]),
            8 => *rng.pick(&[i64::MAX, 1 << 32, (1 << 32) + 3, cap + 1 + (1 << 32)]),
            9 => cap + 1 + rng.below(1 << 20) as i64,
            _ => rng.below(cap as u64 + 1) as i64,
        })
        .collect()
}

pub(super) fn as_bytes<T: Element>(s: &[T]) -> &[u8] {
    // SAFETY: Element types are plain old data; reading their bytes is always valid.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), std::mem::size_of_val(s)) }
}

/// Compares a wait's result with the reference. `Ok(bytes compared)` or what differed.
pub(super) fn check<T: Element>(
    result: &Result<Readout<'_, T>, Error>,
    want: Expected,
    source: &[u8],
) -> Result<u64, String> {
    let size = std::mem::size_of::<T>();
    match (result, want) {
        (Ok(out), Expected::Data(n)) => {
            if out.count() != n || out.len() != n {
                return Err(format!("count {} (len {})", out.count(), out.len()));
            }
            let got = as_bytes(out.as_slice());
            let want = &source[..n * size];
            if got != want {
                let at = got.iter().zip(want).position(|(a, b)| a != b);
                return Err(format!("data differs, first at byte {at:?}"));
            }
            Ok((n * size) as u64)
        }
        (Err(Error::NegativeCount { count }), Expected::Negative(v)) if *count == v => Ok(0),
        (Err(Error::CountExceedsCapacity { count, capacity }), Expected::OverCapacity(n, c))
            if *count == n && *capacity == c =>
        {
            Ok(0)
        }
        (
            Err(Error::CountExceedsSource {
                count,
                column: 0,
                source_len,
            }),
            Expected::OverSource(n, l),
        ) if *count == n && *source_len == l => Ok(0),
        (Ok(out), _) => Err(format!("got {} elements", out.count())),
        (Err(e), _) => Err(format!("got error {e}")),
    }
}
