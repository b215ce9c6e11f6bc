//! The slot ring: which slots are free, which are held by a ticket, and the sequence numbers.
//! Pure host logic, no GPU needed (property-tested in `props`).

/// A slot handed out for one readback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lease {
    /// Slot index.
    pub(crate) slot: usize,
    /// Sequence number of this readback (unique per ring, starting at 1).
    pub(crate) seq: u64,
    /// Whether an earlier readback used this slot; its device work may still be in flight,
    /// so the new one must be ordered after it (a stream wait on the slot's event).
    pub(crate) reused: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Free { used: bool },
    Held { seq: u64 },
}

/// Slot states and the next sequence number.
#[derive(Debug, Clone)]
pub(crate) struct Ring {
    states: Vec<State>,
    next_seq: u64,
    cursor: usize,
}

impl Ring {
    /// A ring of `slots` free, never used slots. Panics if `slots` is zero (callers validate).
    pub(crate) fn new(slots: usize) -> Self {
        assert!(slots > 0, "a ring needs at least one slot");
        Ring {
            states: vec![State::Free { used: false }; slots],
            next_seq: 1,
            cursor: 0,
        }
    }

    /// Slots currently held.
    pub(crate) fn held(&self) -> usize {
        self.states
            .iter()
            .filter(|s| matches!(s, State::Held { .. }))
            .count()
    }

    /// Takes the next free slot in round-robin order, or `None` when every slot is held.
    pub(crate) fn acquire(&mut self) -> Option<Lease> {
        let n = self.states.len();
        for i in 0..n {
            let slot = (self.cursor + i) % n;
            if let State::Free { used } = self.states[slot] {
                let seq = self.next_seq;
                self.next_seq += 1;
                self.states[slot] = State::Held { seq };
                self.cursor = (slot + 1) % n;
                return Some(Lease {
                    slot,
                    seq,
                    reused: used,
                });
            }
        }
        None
    }

    /// Gives a slot back. Returns false (and changes nothing) if the slot is not held under
    /// that sequence number, so a double release cannot free someone else's slot.
    pub(crate) fn release(&mut self, slot: usize, seq: u64) -> bool {
        match self.states.get(slot) {
            Some(State::Held { seq: s }) if *s == seq => {
                self.states[slot] = State::Free { used: true };
                true
            }
            _ => false,
        }
    }

    /// The sequence number the next lease will get.
    #[cfg(test)]
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_out_slots_round_robin_with_rising_sequence_numbers() {
        let mut r = Ring::new(2);
        let a = r.acquire().unwrap();
        let b = r.acquire().unwrap();
        assert_eq!((a.slot, a.seq, a.reused), (0, 1, false));
        assert_eq!((b.slot, b.seq, b.reused), (1, 2, false));
        assert_eq!(r.acquire(), None);
        assert!(r.release(a.slot, a.seq));
        let c = r.acquire().unwrap();
        assert_eq!((c.slot, c.seq, c.reused), (0, 3, true));
    }

    #[test]
    fn release_is_checked() {
        let mut r = Ring::new(1);
        let a = r.acquire().unwrap();
        assert!(!r.release(a.slot, a.seq + 1));
        assert!(!r.release(5, a.seq));
        assert!(r.release(a.slot, a.seq));
        assert!(!r.release(a.slot, a.seq), "double release must not succeed");
        assert_eq!(r.held(), 0);
    }
}
