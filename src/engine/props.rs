//! Property tests of the host-side logic that needs no GPU (run in CI):
//! - the slot ring against a simple model, over random sequences of acquires and releases;
//! - trailer decoding: never panics on arbitrary trailers, maps the status bits exactly, and
//!   turns what the pack kernel writes for a count into the outcome that count deserves;
//! - slot layout arithmetic against a 128-bit model: alignment, no overlap, and overflow
//!   reported as an error, never wrapped.
use super::ring::Ring;
use super::slots::Trailer;
use super::trailer::{self, Fill, Lens};
use crate::layout::{SlotLayout, COLUMN_ALIGN, MAX_COLUMNS, SLOT_ALIGN, TRAILER_BYTES};
use crate::raw::abi;
use crate::{CountKind, Error};
use proptest::prelude::*;

/// The pack decode of `t`, as the old `decode_trailer` took its arguments.
fn decode_trailer(
    t: &Trailer,
    expected: u64,
    slot: usize,
    kind: CountKind,
    capacity: usize,
    lens: &[usize],
) -> crate::Result<usize> {
    let fill = Fill::Pack {
        kind,
        lens: Lens::new(lens),
    };
    trailer::decode(t, expected, slot, capacity, &fill, &[])
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

// ---------------------------------------------------------------------------------------
// Slot ring vs a model

#[derive(Debug, Clone)]
enum Op {
    Acquire,
    /// Release the i-th held lease (mod the number held), with its true sequence number.
    Release(usize),
    /// Release with a wrong sequence number or slot: must be refused and change nothing.
    BadRelease(usize, u64),
    /// Release the same lease twice.
    DoubleRelease(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Acquire),
        3 => any::<usize>().prop_map(Op::Release),
        1 => (any::<usize>(), any::<u64>()).prop_map(|(a, b)| Op::BadRelease(a, b)),
        1 => any::<usize>().prop_map(Op::DoubleRelease),
    ]
}

/// The model: per slot, None (free) or Some(seq); whether it was ever used; the next
/// sequence number; round-robin search from just after the last slot handed out.
#[derive(Debug)]
struct Model {
    held: Vec<Option<u64>>,
    used: Vec<bool>,
    next: u64,
    cursor: usize,
}

impl Model {
    fn acquire(&mut self) -> Option<(usize, u64, bool)> {
        let n = self.held.len();
        let slot = (0..n)
            .map(|i| (self.cursor + i) % n)
            .find(|&s| self.held[s].is_none())?;
        let seq = self.next;
        self.next += 1;
        self.held[slot] = Some(seq);
        let reused = self.used[slot];
        self.used[slot] = true;
        self.cursor = (slot + 1) % n;
        Some((slot, seq, reused))
    }
    fn release(&mut self, slot: usize, seq: u64) -> bool {
        if self.held.get(slot) == Some(&Some(seq)) {
            self.held[slot] = None;
            true
        } else {
            false
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn ring_matches_its_model(slots in 1usize..9, ops in prop::collection::vec(op(), 0..200)) {
        let mut ring = Ring::new(slots);
        let mut model = Model {
            held: vec![None; slots],
            used: vec![false; slots],
            next: 1,
            cursor: 0,
        };
        let mut leases: Vec<(usize, u64)> = Vec::new();
        let mut seen_seqs = std::collections::HashSet::new();
        for op in ops {
            match op {
                Op::Acquire => {
                    let got = ring.acquire().map(|l| (l.slot, l.seq, l.reused));
                    let want = model.acquire();
                    prop_assert_eq!(got, want);
                    if let Some((slot, seq, _)) = got {
                        prop_assert!(slot < slots);
                        prop_assert!(seen_seqs.insert(seq), "sequence number {} handed out twice", seq);
                        prop_assert!(!leases.iter().any(|&(s, _)| s == slot), "slot {} handed out twice", slot);
                        leases.push((slot, seq));
                    } else {
                        prop_assert_eq!(leases.len(), slots, "refused with a free slot");
                    }
                }
                Op::Release(i) if !leases.is_empty() => {
                    let (slot, seq) = leases.remove(i % leases.len());
                    prop_assert!(ring.release(slot, seq));
                    prop_assert!(model.release(slot, seq));
                }
                Op::DoubleRelease(i) if !leases.is_empty() => {
                    let (slot, seq) = leases.remove(i % leases.len());
                    prop_assert!(ring.release(slot, seq));
                    prop_assert!(model.release(slot, seq));
                    prop_assert!(!ring.release(slot, seq), "double release accepted");
                }
                Op::BadRelease(slot, seq) => {
                    let slot = slot % (slots + 2);
                    let real = leases.contains(&(slot, seq));
                    prop_assert_eq!(ring.release(slot, seq), real);
                    prop_assert_eq!(model.release(slot, seq), real);
                    if real {
                        leases.retain(|&l| l != (slot, seq));
                    }
                }
                _ => {}
            }
            prop_assert_eq!(ring.held(), leases.len());
            prop_assert_eq!(ring.next_seq(), model.next);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Trailer decoding

/// The count a kind's `size()` bytes hold when their bit pattern is the low bytes of `bits`:
/// sign-extended for a signed kind, from the table's width and signedness alone.
fn stored_value(kind: CountKind, bits: u64) -> i128 {
    let shift = 64 - 8 * kind.size() as u32;
    if kind.is_signed() {
        (((bits << shift) as i64) >> shift) as i128
    } else {
        ((bits << shift) >> shift) as i128
    }
}

fn arb_trailer() -> impl Strategy<Value = Trailer> {
    let status = prop_oneof![
        Just(0u32),
        Just(abi::SRB_STATUS_NEGATIVE),
        Just(abi::SRB_STATUS_OVER_CAPACITY),
        Just(abi::SRB_STATUS_OVER_SOURCE),
        Just(abi::SRB_STATUS_BAD_COUNT_KIND),
        0u32..8,
        any::<u32>(),
    ];
    let magic = prop_oneof![4 => Just(abi::SRB_TRAILER_MAGIC), 1 => any::<u32>()];
    let count = prop_oneof![0u64..64, any::<u64>(), Just(u64::MAX), Just(1 << 63)];
    (count.clone(), count, status, magic, 0u64..8).prop_map(
        |(count_raw, count_copied, status, magic, seq)| Trailer {
            count_raw,
            count_copied,
            status,
            magic,
            seq,
        },
    )
}

/// What the pack kernel (csrc/pack.cu, srb_read_count and the status logic of srb_pack)
/// writes for a count stored as `kind` with the bit pattern `bits`, a slot of `capacity` and
/// sources of `lens` elements: a model of the device side.
fn kernel_trailer(kind: CountKind, bits: u64, capacity: u64, lens: &[u64], seq: u64) -> Trailer {
    let v = stored_value(kind, bits);
    let (raw, n, mut status) = (
        v as u64,
        v.max(0) as u64,
        if v < 0 { abi::SRB_STATUS_NEGATIVE } else { 0 },
    );
    if status == 0 && n > capacity {
        status = abi::SRB_STATUS_OVER_CAPACITY;
    }
    for &l in lens {
        if status == 0 && n > l {
            status = abi::SRB_STATUS_OVER_SOURCE;
        }
    }
    Trailer {
        count_raw: raw,
        count_copied: if status == 0 { n } else { 0 },
        status,
        magic: abi::SRB_TRAILER_MAGIC,
        seq,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Any trailer, any expectation: no panic; success only for a clean, consistent trailer of
    /// the expected readback; every status bit is an error.
    #[test]
    fn arbitrary_trailers_decode_without_panic(
        t in arb_trailer(),
        expected in 0u64..8,
        slot in 0usize..16,
        kind in prop::sample::select(CountKind::ALL.to_vec()),
        capacity in prop_oneof![1usize..100, Just(usize::MAX)],
        lens in prop::collection::vec(prop_oneof![0usize..100, any::<usize>()], 0..4),
    ) {
        let r = decode_trailer(&t, expected, slot, kind, capacity, &lens);
        let seq_ok = t.seq == expected && t.magic == abi::SRB_TRAILER_MAGIC;
        let corrupt = matches!(r, Err(Error::CorruptTrailer { .. }));
        match r {
            Ok(n) => {
                prop_assert!(seq_ok);
                prop_assert_eq!(t.status, 0);
                prop_assert_eq!(n as u64, t.count_raw);
                prop_assert_eq!(t.count_copied, t.count_raw);
                prop_assert!(n <= capacity);
                prop_assert!(!(kind.is_signed() && (n as i64) < 0));
            }
            Err(Error::CorruptTrailer { slot: s, expected: e, found, magic }) => {
                prop_assert_eq!((s, e, found, magic), (slot, expected, t.seq, t.magic));
            }
            Err(Error::NegativeCount { count }) => {
                prop_assert!(seq_ok);
                prop_assert_eq!(count, t.count_raw as i64);
                prop_assert!(t.status & abi::SRB_STATUS_NEGATIVE != 0
                    || (t.status == 0 && kind.is_signed()));
            }
            Err(Error::UnknownCountKind { kind: k }) => {
                prop_assert!(seq_ok);
                prop_assert_eq!(t.status, abi::SRB_STATUS_BAD_COUNT_KIND);
                prop_assert_eq!((k as u64, t.count_copied), (t.count_raw, 0));
            }
            Err(Error::CountExceedsCapacity { count, capacity: c }) => {
                prop_assert!(seq_ok);
                prop_assert_eq!((count, c), (t.count_raw, capacity));
                prop_assert!(t.status & abi::SRB_STATUS_OVER_CAPACITY != 0);
                prop_assert!(t.status & abi::SRB_STATUS_NEGATIVE == 0);
            }
            Err(Error::CountExceedsSource { count, column, source_len }) => {
                prop_assert!(seq_ok);
                prop_assert_eq!(count, t.count_raw);
                prop_assert!(t.status & abi::SRB_STATUS_OVER_SOURCE != 0);
                prop_assert!(t.status & (abi::SRB_STATUS_NEGATIVE | abi::SRB_STATUS_OVER_CAPACITY) == 0);
                if let Some(&l) = lens.get(column) {
                    prop_assert_eq!(source_len, l);
                }
            }
            Err(e) => prop_assert!(false, "unexpected error {}", e),
        }
        // Wrong sequence number or magic: always corrupt, whatever else the trailer says.
        if !seq_ok {
            prop_assert!(corrupt);
        }
        // Each status bit alone on an otherwise valid trailer maps to its error (a negative
        // count that is no value of its kind, or an unknown kind with rows copied or a kind
        // past u32, are corrupt).
        let is_corrupt = |e: &crate::Result<usize>| matches!(e, Err(Error::CorruptTrailer { .. }));
        for (bit, name) in [
            (abi::SRB_STATUS_NEGATIVE, "negative"),
            (abi::SRB_STATUS_OVER_CAPACITY, "capacity"),
            (abi::SRB_STATUS_OVER_SOURCE, "source"),
            (abi::SRB_STATUS_BAD_COUNT_KIND, "kind"),
        ] {
            let mut u = t;
            u.seq = expected;
            u.magic = abi::SRB_TRAILER_MAGIC;
            u.status = bit;
            let e = decode_trailer(&u, expected, slot, kind, capacity, &lens);
            let ok = match name {
                "negative" if kind.signed_value(u.count_raw) as u64 != u.count_raw => is_corrupt(&e),
                "negative" => matches!(e, Err(Error::NegativeCount { .. })),
                "kind" if u.count_copied != 0 || u.count_raw > u32::MAX as u64 => is_corrupt(&e),
                "kind" => matches!(e, Err(Error::UnknownCountKind { .. })),
                "capacity" => matches!(e, Err(Error::CountExceedsCapacity { .. })),
                _ => matches!(e, Err(Error::CountExceedsSource { .. })),
            };
            prop_assert!(ok, "status bit {} gave {:?}", name, e.map_err(|e| e.to_string()));
        }
    }

    /// What the kernel writes for a count decodes to the outcome the count deserves.
    #[test]
    fn kernel_trailers_decode_to_the_right_outcome(
        kind in prop::sample::select(CountKind::ALL.to_vec()),
        bits in prop_oneof![0u64..300, any::<u64>(), (0u64..300).prop_map(|v| v.wrapping_neg())],
        capacity in 1usize..300,
        lens in prop::collection::vec(0usize..400, 1..=MAX_COLUMNS),
        seq in 1u64..u64::MAX,
    ) {
        let lens64: Vec<u64> = lens.iter().map(|&l| l as u64).collect();
        let t = kernel_trailer(kind, bits, capacity as u64, &lens64, seq);
        let r = decode_trailer(&t, seq, 0, kind, capacity, &lens);
        let value = stored_value(kind, bits);
        if value < 0 {
            let neg = matches!(r, Err(Error::NegativeCount { count }) if count as i128 == value);
            prop_assert!(neg, "{:?}", r.map_err(|e| e.to_string()));
        } else if value > capacity as i128 {
            let over = matches!(r, Err(Error::CountExceedsCapacity { count, capacity: c })
                if count as i128 == value && c == capacity);
            prop_assert!(over, "{:?}", r.map_err(|e| e.to_string()));
        } else if let Some(col) = lens.iter().position(|&l| (l as i128) < value) {
            let short = matches!(r, Err(Error::CountExceedsSource { count, column, source_len })
                if count as i128 == value && column == col && source_len == lens[col]);
            prop_assert!(short, "{:?}", r.map_err(|e| e.to_string()));
        } else {
            prop_assert_eq!(r.ok(), Some(value as usize));
        }
        // A stale trailer (the slot's previous readback) is never taken for this one.
        let stale = decode_trailer(&t, seq.wrapping_add(1), 0, kind, capacity, &lens);
        let corrupt = matches!(stale, Err(Error::CorruptTrailer { .. }));
        prop_assert!(corrupt);
    }
}

// ---------------------------------------------------------------------------------------
// Slot layout arithmetic vs a 128-bit model

fn round_up(x: u128, to: u128) -> u128 {
    x.div_ceil(to) * to
}

/// (offsets, trailer offset, stride) computed in 128 bits, without overflow.
fn model_layout(capacity: u128, sizes: &[u128]) -> (Vec<u128>, u128, u128) {
    let mut at = 0u128;
    let mut offsets = Vec::new();
    for &s in sizes {
        offsets.push(at);
        // Clamped far above usize::MAX: past that only "does not fit" matters.
        at = round_up((at + capacity * s).min(1 << 100), COLUMN_ALIGN as u128);
    }
    let stride = round_up(at + TRAILER_BYTES as u128, SLOT_ALIGN as u128);
    (offsets, at, stride)
}

fn arb_capacity() -> impl Strategy<Value = usize> {
    prop_oneof![
        1usize..5000,
        any::<usize>(),
        (0usize..64).prop_map(|k| usize::MAX >> k),
        (1usize..64).prop_map(|k| (usize::MAX >> k) + 1),
        (0usize..4096).prop_map(|k| usize::MAX / 16 - k),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn layout_is_aligned_disjoint_and_never_wraps(
        capacity in arb_capacity(),
        sizes in prop::collection::vec(prop_oneof![1usize..65, any::<usize>()], 1..=MAX_COLUMNS),
        slots in prop_oneof![1usize..10, any::<usize>()],
    ) {
        let sizes128: Vec<u128> = sizes.iter().map(|&s| s as u128).collect();
        let (offsets, trailer, stride) = model_layout(capacity as u128, &sizes128);
        // Element sizes travel to the kernel as 32-bit fields (srb_column.elem_size).
        let fits = stride <= usize::MAX as u128 && sizes.iter().all(|&s| s <= u32::MAX as usize);
        match SlotLayout::new(capacity, &sizes) {
            Err(Error::InvalidConfig { .. }) => prop_assert!(!fits, "refused a layout that fits"),
            Err(e) => prop_assert!(false, "unexpected error {}", e),
            Ok(l) => {
                prop_assert!(fits, "accepted a layout of {} bytes", stride);
                prop_assert_eq!(l.capacity(), capacity);
                prop_assert_eq!(l.elem_sizes(), &sizes[..]);
                let offs: Vec<u128> = l.column_offsets().iter().map(|&o| o as u128).collect();
                prop_assert_eq!(&offs, &offsets);
                prop_assert_eq!(l.trailer_offset() as u128, trailer);
                prop_assert_eq!(l.slot_stride() as u128, stride);
                prop_assert_eq!(l.slot_bytes() as u128, trailer + TRAILER_BYTES as u128);
                prop_assert_eq!(l.row_bytes() as u128, sizes128.iter().sum::<u128>());
                // Alignment and no overlap: each column ends before the next begins, the last
                // before the trailer, the trailer inside the stride.
                for (i, &o) in offs.iter().enumerate() {
                    prop_assert_eq!(o % COLUMN_ALIGN as u128, 0);
                    let end = o + capacity as u128 * sizes128[i];
                    let next = offs.get(i + 1).copied().unwrap_or(trailer);
                    prop_assert!(end <= next, "column {} overlaps what follows", i);
                }
                prop_assert_eq!(trailer % 16, 0);
                prop_assert!(trailer + TRAILER_BYTES as u128 <= stride);
                prop_assert_eq!(stride % SLOT_ALIGN as u128, 0);
                let total = stride * slots as u128;
                match l.total_bytes(slots) {
                    Ok(b) => prop_assert_eq!(b as u128, total),
                    Err(Error::InvalidConfig { .. }) => prop_assert!(total > usize::MAX as u128),
                    Err(e) => prop_assert!(false, "unexpected error {}", e),
                }
            }
        }
    }

    #[test]
    fn layout_rejects_zero_and_too_many(
        capacity in 0usize..3,
        ncols in 0usize..=MAX_COLUMNS + 3,
        zero_at in any::<prop::sample::Index>(),
    ) {
        let mut sizes = vec![4usize; ncols];
        let bad_cols = ncols == 0 || ncols > MAX_COLUMNS;
        let r = SlotLayout::new(capacity, &sizes);
        prop_assert_eq!(r.is_err(), capacity == 0 || bad_cols);
        if ncols > 0 && !bad_cols && capacity > 0 {
            sizes[zero_at.index(ncols)] = 0;
            let zero = matches!(SlotLayout::new(capacity, &sizes), Err(Error::InvalidConfig { .. }));
            prop_assert!(zero);
        }
    }
}
