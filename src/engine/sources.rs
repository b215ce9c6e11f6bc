//! The sources of one enqueue and their lengths, inline (no allocation on the enqueue path).
use crate::layout::MAX_COLUMNS;
use crate::source::ColumnSource;

/// The sources of one enqueue, in column order, without allocating.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Sources {
    cols: [ColumnSource; MAX_COLUMNS],
    n: usize,
}

impl Sources {
    /// The first [`MAX_COLUMNS`] of `cols` (callers check the number against the layout).
    pub(crate) fn new(cols: &[ColumnSource]) -> Self {
        let n = cols.len().min(MAX_COLUMNS);
        let mut s = Sources {
            n,
            ..Default::default()
        };
        s.cols[..n].copy_from_slice(&cols[..n]);
        s
    }
    pub(crate) fn as_slice(&self) -> &[ColumnSource] {
        &self.cols[..self.n]
    }
    /// Each column's source length.
    pub(crate) fn lens(&self) -> Lens {
        let mut l = Lens::default();
        for (d, s) in l.v.iter_mut().zip(self.as_slice()) {
            *d = s.len;
        }
        l.n = self.n;
        l
    }
}

/// Up to [`MAX_COLUMNS`] lengths or sizes, inline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Lens {
    v: [usize; MAX_COLUMNS],
    n: usize,
}

impl Lens {
    pub(crate) fn as_slice(&self) -> &[usize] {
        &self.v[..self.n]
    }
}
