//! The source lengths of one enqueue, inline (no allocation on the enqueue path).
use crate::layout::MAX_COLUMNS;
use crate::source::ColumnSource;

/// Up to [`MAX_COLUMNS`] lengths or sizes, inline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Lens {
    v: [usize; MAX_COLUMNS],
    n: usize,
}

impl Lens {
    /// The lengths of the first [`MAX_COLUMNS`] of `sources` (callers check the number against
    /// the layout).
    pub(crate) fn of(sources: &[ColumnSource]) -> Self {
        let mut l = Lens {
            n: sources.len().min(MAX_COLUMNS),
            ..Default::default()
        };
        for (d, s) in l.v.iter_mut().zip(sources) {
            *d = s.len;
        }
        l
    }

    pub(crate) fn as_slice(&self) -> &[usize] {
        &self.v[..self.n]
    }
}
