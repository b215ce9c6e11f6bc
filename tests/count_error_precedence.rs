//! Which error a count that is wrong in several ways gets: the pack's trailer decode, on the
//! host, with no GPU (through the `testing` feature's `decode_pack_trailer`, the fuzz target's
//! entry point). The pack kernel (csrc/pack.cu) sets one status bit, checking a negative count,
//! then the capacity, then each source in turn; the decode reads the bits in the same order, so
//! a trailer with several bits set reads as the kernel would have reported it.
use sized_readback::testing::decode_pack_trailer;
use sized_readback::{CountKind, Error};

/// include/sized_readback/slot.h: SRB_TRAILER_MAGIC and the status bits.
const MAGIC: u32 = 0x3142_5253;
const NEGATIVE: u32 = 1 << 0;
const OVER_CAPACITY: u32 = 1 << 1;
const OVER_SOURCE: u32 = 1 << 2;

/// The 32 bytes of a trailer of readback `seq` with nothing copied.
fn trailer(count: u64, status: u32, seq: u64) -> [u8; 32] {
    let mut b = [0u8; 32];
    b[0..8].copy_from_slice(&count.to_le_bytes());
    b[16..20].copy_from_slice(&status.to_le_bytes());
    b[20..24].copy_from_slice(&MAGIC.to_le_bytes());
    b[24..32].copy_from_slice(&seq.to_le_bytes());
    b
}

/// A count of 100 into a slot of 16 rows from sources of 50 and 40 elements: above the
/// capacity and both sources. The kernel reports the capacity (`CountExceedsCapacity`, what
/// `grow` answers), and so does the decode even with the source's bit set too.
#[test]
fn a_count_above_the_capacity_and_a_source_exceeds_the_capacity() {
    let lens = [50, 40];
    for status in [OVER_CAPACITY, OVER_CAPACITY | OVER_SOURCE] {
        let got = decode_pack_trailer(&trailer(100, status, 3), 3, CountKind::U32, 16, &lens);
        assert!(
            matches!(
                got,
                Err(Error::CountExceedsCapacity {
                    count: 100,
                    capacity: 16
                })
            ),
            "status {status:#x}: {got:?}"
        );
    }
}

/// A negative count comes first, whatever else is set.
#[test]
fn a_negative_count_comes_first() {
    let raw = (-5i64) as u64;
    let status = NEGATIVE | OVER_CAPACITY | OVER_SOURCE;
    let got = decode_pack_trailer(&trailer(raw, status, 1), 1, CountKind::I64, 16, &[8]);
    assert!(
        matches!(got, Err(Error::NegativeCount { count: -5 })),
        "{got:?}"
    );
}

/// Within the capacity, a count past a source names the first short column.
#[test]
fn within_the_capacity_the_first_short_source_is_named() {
    let got = decode_pack_trailer(
        &trailer(20, OVER_SOURCE, 2),
        2,
        CountKind::U64,
        32,
        &[64, 10, 5],
    );
    assert!(
        matches!(
            got,
            Err(Error::CountExceedsSource {
                count: 20,
                column: 1,
                source_len: 10
            })
        ),
        "{got:?}"
    );
}
