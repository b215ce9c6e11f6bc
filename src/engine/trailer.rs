//! What fills a slot ([`Fill`]), and decoding the trailer (and bucket table) it leaves into
//! the rows the slot holds or the error its status bits stand for: one decode for both
//! engines, on pure host logic that needs no GPU.
use super::slots::{BucketTable, Slots, Trailer};
use super::view::SlotView;
use crate::element::CountKind;
use crate::error::{Error, Result};
use crate::layout::MAX_COLUMNS;
use crate::raw::abi;
use crate::source::ColumnSource;

/// What fills a slot, and what decoding it needs to know about that. A ticket holds the fill
/// of its readback; every recording of a graph readback has the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fill {
    /// The pack kernel (the bucket pack, in a slot with a bucket table), from a count (k
    /// counts) of `kind` and sources of `lens` elements, which name the short column.
    Pack { kind: CountKind, lens: Lens },
    /// User kernels through the append header, with `spill_rows` rows of spill per slot (per
    /// bucket).
    Append { spill_rows: usize },
}

impl Fill {
    /// Reads slot `slot` of `slots`, complete (its acquire taken) and held by the caller, and
    /// decodes it as readback `seq`: the view of its rows, or the error it reports.
    pub(crate) fn decode<'s>(
        &self,
        slots: &'s Slots,
        slot: usize,
        seq: u64,
    ) -> Result<SlotView<'s>> {
        let t = slots.trailer(slot);
        if let Fill::Append { .. } = self {
            if t.seq != seq {
                // Complete (the event says so) but no trailer: the kernel never finished.
                return Err(Error::AppendUnfinished { seq });
            }
        }
        let layout = slots.layout();
        let (capacity, columns) = (layout.capacity(), layout.elem_sizes());
        if layout.has_bucket_table() {
            let table = slots.bucket_table(slot);
            let rows = decode_buckets(&t, &table, seq, slot, capacity, self, columns)?;
            Ok(SlotView::with_buckets(slots, slot, rows, seq))
        } else {
            let rows = decode(&t, seq, slot, capacity, self, columns)?;
            Ok(SlotView::new(slots, slot, rows, seq))
        }
    }
}

/// Up to [`MAX_COLUMNS`] source lengths, inline (no allocation on the enqueue path).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Lens {
    v: [usize; MAX_COLUMNS],
    n: usize,
}

impl Lens {
    /// The first [`MAX_COLUMNS`] of `lens` (the decoding tests', which give lengths alone).
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn new(lens: &[usize]) -> Self {
        let n = lens.len().min(MAX_COLUMNS);
        let mut l = Lens {
            n,
            ..Default::default()
        };
        l.v[..n].copy_from_slice(&lens[..n]);
        l
    }

    /// The lengths of the first [`MAX_COLUMNS`] of `sources`.
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

/// Decodes a bucketed slot filled as `fill`: its trailer `t` and table, `capacity` rows per
/// bucket of `columns` (element sizes). Returns the rows of each bucket in the slot, or the
/// error the trailer and table report.
pub(crate) fn decode_buckets(
    t: &Trailer,
    table: &BucketTable,
    expected: u64,
    slot: usize,
    capacity: usize,
    fill: &Fill,
    columns: &[usize],
) -> Result<Vec<usize>> {
    let corrupt = || Error::CorruptTrailer {
        slot,
        expected,
        found: t.seq,
        magic: t.magic,
    };
    if t.seq != expected || t.magic != abi::SRB_TRAILER_MAGIC {
        return Err(corrupt());
    }
    let k = table.counts.len();
    let cap = capacity as u64;
    match *fill {
        Fill::Pack { kind, .. } => {
            let bucket = table.bad_bucket as usize;
            let count = |b: usize| table.counts.get(b).copied().unwrap_or(0);
            if t.status & abi::SRB_STATUS_BAD_COUNT_KIND != 0 {
                return unknown_kind(t, corrupt);
            }
            if t.status & abi::SRB_STATUS_NEGATIVE != 0 {
                return Err(negative(kind, count(bucket), corrupt));
            }
            if t.status & abi::SRB_STATUS_OVER_CAPACITY != 0 {
                return Err(Error::BucketOverCapacity {
                    bucket,
                    count: count(bucket),
                    capacity,
                });
            }
            if t.status & abi::SRB_STATUS_BAD_OFFSETS != 0 {
                return Err(Error::BucketOutOfRange {
                    bucket,
                    offset: table.bad_offset,
                    count: count(bucket),
                    limit: table.bad_limit,
                });
            }
            if t.status != abi::SRB_STATUS_OK
                || table.counts.iter().any(|&c| c > cap)
                || t.count_raw != table.counts.iter().sum::<u64>()
                || t.count_copied != t.count_raw
            {
                return Err(corrupt());
            }
            Ok(table.counts.iter().map(|&c| c as usize).collect())
        }
        Fill::Append { spill_rows } => {
            let spill_capacity = spill_rows as u64;
            let known = abi::SRB_STATUS_SPILLED
                | abi::SRB_STATUS_DROPPED
                | abi::SRB_STATUS_MISUSE
                | abi::SRB_STATUS_BAD_BUCKET;
            if t.status & !known != 0 {
                return Err(corrupt());
            }
            if t.status & abi::SRB_STATUS_MISUSE != 0 {
                return Err(misuse(columns));
            }
            let rows: Vec<usize> = table.counts.iter().map(|&c| c.min(cap) as usize).collect();
            let total: u64 = table.counts.iter().sum();
            if t.count_raw != total || t.count_copied != rows.iter().sum::<usize>() as u64 {
                return Err(corrupt());
            }
            if t.status & abi::SRB_STATUS_BAD_BUCKET != 0 {
                return Err(Error::BadBucket {
                    bucket: table.bad_bucket,
                    buckets: k,
                    rows: table.bad_rows,
                });
            }
            if table.counts.iter().any(|&c| c > cap) {
                let spilled: u64 = table
                    .counts
                    .iter()
                    .map(|&c| c.saturating_sub(cap).min(spill_capacity))
                    .sum();
                let over: u64 = table.counts.iter().map(|&c| c.saturating_sub(cap)).sum();
                return Err(Error::AppendOverflow {
                    count: total,
                    capacity,
                    spilled,
                    dropped: over - spilled,
                });
            }
            Ok(rows)
        }
    }
}

/// A negative count of `kind` as the kernel widened it (`raw`), or `corrupt` when `raw` is
/// not a value of the kind sign-extended from its width (the table's width and signedness).
fn negative(kind: CountKind, raw: u64, corrupt: impl Fn() -> Error) -> Error {
    let count = kind.signed_value(raw);
    if count as u64 == raw {
        Error::NegativeCount { count }
    } else {
        corrupt()
    }
}

/// A pack's report of a count kind its kernel does not know: the kind is in `count_raw`, and
/// nothing was copied (else the trailer is `corrupt`).
fn unknown_kind<T>(t: &Trailer, corrupt: impl Fn() -> Error) -> Result<T> {
    match u32::try_from(t.count_raw) {
        Ok(kind) if t.status == abi::SRB_STATUS_BAD_COUNT_KIND && t.count_copied == 0 => {
            Err(Error::UnknownCountKind { kind })
        }
        _ => Err(corrupt()),
    }
}

fn misuse(columns: &[usize]) -> Error {
    Error::AppendMisuse {
        columns: columns.len(),
        sizes: columns
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// Decodes trailer `t` of slot `slot`, expected to hold readback `expected`, of a slot of
/// `capacity` rows of `columns` (element sizes) filled as `fill`. Returns the rows in the
/// slot, or the error the trailer reports.
pub(crate) fn decode(
    t: &Trailer,
    expected: u64,
    slot: usize,
    capacity: usize,
    fill: &Fill,
    columns: &[usize],
) -> Result<usize> {
    let corrupt = || Error::CorruptTrailer {
        slot,
        expected,
        found: t.seq,
        magic: t.magic,
    };
    if t.seq != expected || t.magic != abi::SRB_TRAILER_MAGIC {
        return Err(corrupt());
    }
    let count = t.count_raw;
    match *fill {
        Fill::Pack { kind, lens } => {
            let source_lens = lens.as_slice();
            if t.status & abi::SRB_STATUS_BAD_COUNT_KIND != 0 {
                return unknown_kind(t, corrupt);
            }
            if t.status & abi::SRB_STATUS_NEGATIVE != 0 {
                return Err(negative(kind, count, corrupt));
            }
            if t.status & abi::SRB_STATUS_OVER_CAPACITY != 0 {
                return Err(Error::CountExceedsCapacity { count, capacity });
            }
            if t.status & abi::SRB_STATUS_OVER_SOURCE != 0 {
                let column = source_lens
                    .iter()
                    .position(|&len| (len as u64) < count)
                    .unwrap_or(0);
                return Err(Error::CountExceedsSource {
                    count,
                    column,
                    source_len: source_lens.get(column).copied().unwrap_or(0),
                });
            }
            if t.status != abi::SRB_STATUS_OK || t.count_copied != count || count > capacity as u64
            {
                return Err(corrupt());
            }
            if kind.is_signed() && (count as i64) < 0 {
                return Err(Error::NegativeCount {
                    count: count as i64,
                });
            }
            Ok(count as usize)
        }
        Fill::Append { spill_rows } => {
            let spill_capacity = spill_rows as u64;
            let known = abi::SRB_STATUS_SPILLED | abi::SRB_STATUS_DROPPED | abi::SRB_STATUS_MISUSE;
            if t.status & !known != 0 {
                return Err(corrupt());
            }
            if t.status & abi::SRB_STATUS_MISUSE != 0 {
                return Err(misuse(columns));
            }
            let cap = capacity as u64;
            let copied = count.min(cap);
            if t.count_copied != copied {
                return Err(corrupt());
            }
            if count > cap {
                let spilled = (count - cap).min(spill_capacity);
                return Err(Error::AppendOverflow {
                    count,
                    capacity,
                    spilled,
                    dropped: count - cap - spilled,
                });
            }
            Ok(count as usize)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trailer(raw: u64, copied: u64, status: u32, seq: u64) -> Trailer {
        Trailer {
            count_raw: raw,
            count_copied: copied,
            status,
            magic: abi::SRB_TRAILER_MAGIC,
            seq,
        }
    }

    /// A fill and the slot's element sizes, as the decoders take them.
    type Given = (Fill, &'static [usize]);

    fn pack(kind: CountKind, lens: &[usize]) -> Given {
        let lens = Lens::new(lens);
        (Fill::Pack { kind, lens }, &[8])
    }

    fn append(spill_rows: usize, columns: &'static [usize]) -> Given {
        (Fill::Append { spill_rows }, columns)
    }

    fn decode(t: &Trailer, expected: u64, slot: usize, cap: usize, f: Given) -> Result<usize> {
        super::decode(t, expected, slot, cap, &f.0, f.1)
    }

    fn decode_buckets(
        t: &Trailer,
        table: &BucketTable,
        expected: u64,
        slot: usize,
        capacity: usize,
        f: Given,
    ) -> Result<Vec<usize>> {
        super::decode_buckets(t, table, expected, slot, capacity, &f.0, f.1)
    }

    #[test]
    fn decodes_a_good_trailer() {
        let t = trailer(5, 5, 0, 7);
        assert_eq!(decode(&t, 7, 0, 8, pack(CountKind::I32, &[10])).unwrap(), 5);
        let empty = trailer(0, 0, 0, 1);
        assert_eq!(
            decode(&empty, 1, 0, 8, pack(CountKind::U64, &[0])).unwrap(),
            0
        );
    }

    #[test]
    fn maps_status_bits_to_errors() {
        let neg = trailer((-3i64) as u64, 0, abi::SRB_STATUS_NEGATIVE, 2);
        assert!(matches!(
            decode(&neg, 2, 0, 8, pack(CountKind::I32, &[8])),
            Err(Error::NegativeCount { count: -3 })
        ));
        let over = trailer(9, 0, abi::SRB_STATUS_OVER_CAPACITY, 2);
        assert!(matches!(
            decode(&over, 2, 0, 8, pack(CountKind::I32, &[100])),
            Err(Error::CountExceedsCapacity {
                count: 9,
                capacity: 8
            })
        ));
        let short = trailer(6, 0, abi::SRB_STATUS_OVER_SOURCE, 2);
        assert!(matches!(
            decode(&short, 2, 0, 8, pack(CountKind::I32, &[10, 5])),
            Err(Error::CountExceedsSource {
                count: 6,
                column: 1,
                source_len: 5
            })
        ));
    }

    #[test]
    fn stale_or_garbled_trailers_are_corrupt() {
        let p = pack(CountKind::I32, &[8]);
        let stale = trailer(5, 5, 0, 6);
        assert!(matches!(
            decode(&stale, 7, 3, 8, p),
            Err(Error::CorruptTrailer {
                slot: 3,
                expected: 7,
                found: 6,
                ..
            })
        ));
        let mut bad_magic = trailer(5, 5, 0, 7);
        bad_magic.magic = 0;
        assert!(decode(&bad_magic, 7, 0, 8, p).is_err());
        let mismatch = trailer(5, 4, 0, 7);
        assert!(decode(&mismatch, 7, 0, 8, p).is_err());
        let too_big = trailer(9, 9, 0, 7);
        assert!(decode(&too_big, 7, 0, 8, pack(CountKind::I32, &[9])).is_err());
    }

    /// The kernel's report of a kind it does not know (its trailer's count is the kind) is
    /// the typed error, for a pack and a bucket pack; with rows copied it is corrupt.
    #[test]
    fn an_unknown_count_kind_on_the_device_is_its_own_error() {
        let p = pack(CountKind::U64, &[8]);
        let t = trailer(9, 0, abi::SRB_STATUS_BAD_COUNT_KIND, 3);
        assert!(matches!(
            decode(&t, 3, 0, 8, p),
            Err(Error::UnknownCountKind { kind: 9 })
        ));
        assert!(matches!(
            decode_buckets(&t, &table(&[9, 9]), 3, 0, 8, p),
            Err(Error::UnknownCountKind { kind: 9 })
        ));
        let copied = trailer(9, 1, abi::SRB_STATUS_BAD_COUNT_KIND, 3);
        assert!(matches!(
            decode(&copied, 3, 0, 8, p),
            Err(Error::CorruptTrailer { .. })
        ));
        let wide = trailer(1 << 32, 0, abi::SRB_STATUS_BAD_COUNT_KIND, 3);
        assert!(matches!(
            decode(&wide, 3, 0, 8, p),
            Err(Error::CorruptTrailer { .. })
        ));
    }

    /// A negative count is the kind's value sign-extended from the kind's width (the table's),
    /// for every signed kind and both packs; bits that are no such value are corrupt.
    #[test]
    fn negative_counts_take_the_width_and_sign_of_their_kind() {
        let neg = |raw: u64| trailer(raw, 0, abi::SRB_STATUS_NEGATIVE, 2);
        for kind in CountKind::ALL.into_iter().filter(|k| k.is_signed()) {
            let p = pack(kind, &[8]);
            assert!(matches!(
                decode(&neg((-5i64) as u64), 2, 0, 8, p),
                Err(Error::NegativeCount { count: -5 })
            ));
            let mut t = table(&[1, (-5i64) as u64]);
            t.bad_bucket = 1;
            assert!(matches!(
                decode_buckets(&neg(0), &t, 2, 0, 8, p),
                Err(Error::NegativeCount { count: -5 })
            ));
        }
        // -5 as 32 bits, not widened: no i32 the kernel would write, nor an i64 below zero.
        let narrow = neg(0xFFFF_FFFB);
        assert!(matches!(
            decode(&narrow, 2, 0, 8, pack(CountKind::I32, &[8])),
            Err(Error::CorruptTrailer { .. })
        ));
        assert_eq!(CountKind::I32.signed_value(0xFFFF_FFFB), -5);
        assert_eq!(CountKind::I64.signed_value(0xFFFF_FFFB), 0xFFFF_FFFB);
    }

    fn table(counts: &[u64]) -> BucketTable {
        BucketTable {
            counts: counts.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn bucketed_slots_report_each_bucket() {
        let a = append(2, &[8]);
        let ok = trailer(6, 6, 0, 4);
        assert_eq!(
            decode_buckets(&ok, &table(&[1, 0, 5]), 4, 0, 5, a).unwrap(),
            [1, 0, 5]
        );
        // Bucket 1 over by 3: 2 spilled, 1 dropped; the other buckets' rows stay.
        let over = trailer(10, 7, abi::SRB_STATUS_SPILLED | abi::SRB_STATUS_DROPPED, 4);
        assert!(matches!(
            decode_buckets(&over, &table(&[2, 8, 0]), 4, 0, 5, a),
            Err(Error::AppendOverflow {
                count: 10,
                capacity: 5,
                spilled: 2,
                dropped: 1
            })
        ));
        let mut bad = table(&[1, 1]);
        bad.bad_rows = 3;
        bad.bad_bucket = 9;
        let t = trailer(2, 2, abi::SRB_STATUS_BAD_BUCKET, 4);
        assert!(matches!(
            decode_buckets(&t, &bad, 4, 0, 5, a),
            Err(Error::BadBucket {
                bucket: 9,
                buckets: 2,
                rows: 3
            })
        ));
        // A table that does not add up to the trailer is corrupt.
        assert!(matches!(
            decode_buckets(&ok, &table(&[1, 0, 4]), 4, 0, 5, a),
            Err(Error::CorruptTrailer { .. })
        ));
        // Bucket packs: the first offending bucket, with its numbers.
        let p = pack(CountKind::U32, &[100]);
        let mut t2 = table(&[3, 9]);
        t2.bad_bucket = 1;
        let over = trailer(12, 0, abi::SRB_STATUS_OVER_CAPACITY, 4);
        assert!(matches!(
            decode_buckets(&over, &t2, 4, 0, 5, p),
            Err(Error::BucketOverCapacity {
                bucket: 1,
                count: 9,
                capacity: 5
            })
        ));
        let mut t3 = table(&[3, 4]);
        t3.bad_bucket = 0;
        t3.bad_offset = 10;
        t3.bad_limit = 12;
        let range = trailer(7, 0, abi::SRB_STATUS_BAD_OFFSETS, 4);
        assert!(matches!(
            decode_buckets(&range, &t3, 4, 0, 5, p),
            Err(Error::BucketOutOfRange {
                bucket: 0,
                offset: 10,
                count: 3,
                limit: 12
            })
        ));
        assert_eq!(
            decode_buckets(&trailer(7, 7, 0, 4), &table(&[3, 4]), 4, 0, 5, p).unwrap(),
            [3, 4]
        );
    }

    #[test]
    fn append_overflow_reports_slot_spill_and_dropped_rows() {
        let a = append(4, &[8, 4]);
        assert_eq!(decode(&trailer(8, 8, 0, 3), 3, 0, 8, a).unwrap(), 8);
        let spilled = trailer(11, 8, abi::SRB_STATUS_SPILLED, 3);
        assert!(matches!(
            decode(&spilled, 3, 0, 8, a),
            Err(Error::AppendOverflow {
                count: 11,
                capacity: 8,
                spilled: 3,
                dropped: 0
            })
        ));
        let dropped = trailer(20, 8, abi::SRB_STATUS_SPILLED | abi::SRB_STATUS_DROPPED, 3);
        assert!(matches!(
            decode(&dropped, 3, 0, 8, a),
            Err(Error::AppendOverflow {
                count: 20,
                spilled: 4,
                dropped: 8,
                ..
            })
        ));
        let misuse = trailer(0, 0, abi::SRB_STATUS_MISUSE, 3);
        let e = decode(&misuse, 3, 0, 8, a).unwrap_err();
        assert!(e.to_string().contains("2 column(s) of 8, 4 bytes"), "{e}");
        // A pack status in an append trailer, or rows copied that do not match, is corrupt.
        let wrong = trailer(5, 5, abi::SRB_STATUS_NEGATIVE, 3);
        assert!(matches!(
            decode(&wrong, 3, 0, 8, a),
            Err(Error::CorruptTrailer { .. })
        ));
        assert!(matches!(
            decode(&trailer(9, 9, 0, 3), 3, 0, 8, a),
            Err(Error::CorruptTrailer { .. })
        ));
    }
}
