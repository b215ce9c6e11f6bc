//! Decoding a slot's trailer into a count or the error its status bits stand for: pure host
//! logic, no GPU needed.
use crate::element::CountKind;
use crate::error::{Error, Result};
use crate::raw::abi;

/// The trailer at the end of every slot, as a kernel wrote it.
pub(crate) type Trailer = abi::srb_trailer;

/// What a slot was filled by, and what decoding needs to know about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Filler<'a> {
    /// The pack kernel, reading a count of `kind`; `source_lens` name the short column.
    Pack {
        kind: CountKind,
        source_lens: &'a [usize],
    },
    /// A user kernel through the append header, with `spill_capacity` rows of spill.
    Append {
        spill_capacity: u64,
        columns: &'a [usize],
    },
}

/// Decodes trailer `t` of slot `slot`, expected to hold readback `expected`, of a slot of
/// `capacity` rows. Returns the rows in the slot, or the error the trailer reports.
pub(crate) fn decode(
    t: &Trailer,
    expected: u64,
    slot: usize,
    capacity: usize,
    filler: Filler<'_>,
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
    match filler {
        Filler::Pack { kind, source_lens } => {
            if t.status & abi::SRB_STATUS_NEGATIVE != 0 {
                return Err(Error::NegativeCount {
                    count: count as i64,
                });
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
        Filler::Append {
            spill_capacity,
            columns,
        } => {
            let known = abi::SRB_STATUS_SPILLED | abi::SRB_STATUS_DROPPED | abi::SRB_STATUS_MISUSE;
            if t.status & !known != 0 {
                return Err(corrupt());
            }
            if t.status & abi::SRB_STATUS_MISUSE != 0 {
                return Err(Error::AppendMisuse {
                    columns: columns.len(),
                    sizes: columns
                        .iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
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

    fn pack(kind: CountKind, lens: &[usize]) -> Filler<'_> {
        Filler::Pack {
            kind,
            source_lens: lens,
        }
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

    #[test]
    fn append_overflow_reports_slot_spill_and_dropped_rows() {
        let a = Filler::Append {
            spill_capacity: 4,
            columns: &[8, 4],
        };
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
