//! What a readback reads, kept alive (Python references) until the readback is known complete.
use pyo3::prelude::*;

/// The arrays, a DLPack capsule, the stream object of one enqueue. The common enqueue (data,
/// count, maybe a capsule or a stream) fits inline, so a ticket allocates nothing for it.
#[derive(Default)]
pub(crate) struct Keep {
    inline: [Option<Py<PyAny>>; 4],
    more: Vec<Py<PyAny>>,
}

impl Keep {
    pub(crate) fn push(&mut self, o: Py<PyAny>) {
        match self.inline.iter_mut().find(|s| s.is_none()) {
            Some(slot) => *slot = Some(o),
            None => self.more.push(o),
        }
    }
    pub(crate) fn len(&self) -> usize {
        self.inline.iter().filter(|s| s.is_some()).count() + self.more.len()
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.inline[0].is_none() && self.more.is_empty()
    }
    pub(crate) fn clear(&mut self) {
        *self = Keep::default();
    }
    pub(crate) fn into_vec(self) -> Vec<Py<PyAny>> {
        self.inline.into_iter().flatten().chain(self.more).collect()
    }
}

impl Extend<Py<PyAny>> for Keep {
    fn extend<I: IntoIterator<Item = Py<PyAny>>>(&mut self, it: I) {
        for o in it {
            self.push(o);
        }
    }
}
