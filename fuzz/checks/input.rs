//! Fuzz bytes as arguments: a small reader shared by the fuzz targets and their replay under
//! `cargo test` (capi/tests/fuzz_replay.rs), so the checks need no `arbitrary` in the main
//! workspace. Each value is biased to the edges (0, 1, MAX, small numbers, powers of two and
//! their neighbours), where size arithmetic breaks; past the end of the input every value is 0.

/// The fuzz input, read front to back.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    /// A reader of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next byte (0 past the end).
    pub fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// The next `n` bytes as a little-endian number (missing bytes are 0).
    fn raw(&mut self, n: usize) -> u64 {
        (0..n).fold(0u64, |v, i| v | (u64::from(self.byte()) << (8 * i)))
    }

    /// A flag, true for an odd byte.
    pub fn bool(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// A number of `bits` bits (8 to 64), biased to the edges.
    fn edgy(&mut self, bits: u32) -> u64 {
        let max = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let v = match self.byte() % 10 {
            0 => 0,
            1 => 1,
            2 => max,
            3 => max - u64::from(self.byte() % 4),
            4 | 5 => u64::from(self.byte()),
            6 => {
                let shift = u32::from(self.byte()) % bits;
                let off = i64::from(self.byte() % 3) - 1;
                (1u64 << shift).wrapping_add_signed(off)
            }
            7 => max / u64::from(self.byte()).max(1),
            _ => self.raw(bits.div_ceil(8) as usize),
        };
        v & max
    }

    /// A `u64` biased to the edges.
    pub fn u64(&mut self) -> u64 {
        self.edgy(64)
    }
    /// A `usize` biased to the edges.
    pub fn usize(&mut self) -> usize {
        self.edgy(usize::BITS) as usize
    }
    /// A `u32` biased to the edges.
    pub fn u32(&mut self) -> u32 {
        self.edgy(32) as u32
    }
    /// An `i32` biased to the edges (negative ones too).
    pub fn i32(&mut self) -> i32 {
        match self.byte() % 4 {
            0 => -(self.byte() as i32),
            1 => i32::MIN,
            _ => self.edgy(32) as u32 as i32,
        }
    }
    /// An `i64` biased to the edges (negative ones too).
    pub fn i64(&mut self) -> i64 {
        match self.byte() % 4 {
            0 => -i64::from(self.byte()),
            1 => i64::MIN,
            _ => self.edgy(64) as i64,
        }
    }
}

/// `n` pseudo-random inputs of up to `max_len` bytes (xorshift, from `seed`): the replay's
/// deterministic sweep.
pub fn sweep(seed: u64, n: usize, max_len: usize) -> impl Iterator<Item = Vec<u8>> {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..n).map(move |_| {
        let len = (next() % (max_len as u64 + 1)) as usize;
        (0..len).map(|_| next() as u8).collect()
    })
}
