//! The pack trailer's decoding with arbitrary trailer bytes and arguments (through the
//! `testing` feature): it must never panic, and its answer must agree with the trailer
//! (success only for a clean trailer of the expected readback, within capacity; every status
//! bit an error).
use sized_readback::testing::decode_pack_trailer;
use sized_readback::{CountKind, Error};

const TRAILER_BYTES: usize = 32;
/// "SRB1", include/sized_readback/slot.h's SRB_TRAILER_MAGIC.
const MAGIC: u32 = 0x3142_5253;

struct Trailer {
    count_raw: u64,
    count_copied: u64,
    status: u32,
    magic: u32,
    seq: u64,
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().unwrap())
}
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().unwrap())
}

/// Decodes one trailer from `data` and checks the answer.
pub fn check(data: &[u8]) {
    // 32 trailer bytes, then: expected seq (8), capacity (8), kind (1), source lengths (8 each).
    if data.len() < TRAILER_BYTES + 17 {
        return;
    }
    let t = Trailer {
        count_raw: u64_at(data, 0),
        count_copied: u64_at(data, 8),
        status: u32_at(data, 16),
        magic: u32_at(data, 20),
        seq: u64_at(data, 24),
    };
    let rest = &data[TRAILER_BYTES..];
    let expected = u64_at(rest, 0);
    // Mostly small capacities, so valid counts get through too.
    let capacity = (u64_at(rest, 8) as usize).max(1);
    let kind = CountKind::ALL[rest[16] as usize % CountKind::ALL.len()];
    let lens: Vec<usize> = rest[17..]
        .chunks_exact(8)
        .take(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()) as usize)
        .collect();
    let bytes: &[u8; 32] = data[..TRAILER_BYTES].try_into().unwrap();
    let r = decode_pack_trailer(bytes, expected, kind, capacity, &lens);
    let clean = t.seq == expected && t.magic == MAGIC;
    match r {
        Ok(n) => {
            assert!(clean && t.status == 0);
            assert_eq!(n as u64, t.count_raw);
            assert_eq!(t.count_copied, t.count_raw);
            assert!(n <= capacity);
        }
        Err(Error::CorruptTrailer { .. }) => {}
        Err(Error::NegativeCount { .. })
        | Err(Error::UnknownCountKind { .. })
        | Err(Error::CountExceedsCapacity { .. })
        | Err(Error::CountExceedsSource { .. }) => assert!(clean),
        Err(e) => panic!("unexpected error {e}"),
    }
    if !clean {
        assert!(matches!(r, Err(Error::CorruptTrailer { .. })));
    }
    if clean && t.status != 0 {
        assert!(r.is_err());
    }
}
