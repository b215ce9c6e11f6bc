//! The count kinds on the device: the pack kernel's guard against a kind it does not know (a
//! kind value no count type has reaches it only through `testing::pack_with_count_kind`: the
//! safe API cannot name one and the C API refuses one), and every kind of the table through
//! that same raw launch.
use anyhow::{ensure, Result};
use cudarc::driver::{CudaContext, DevicePtr};
use sized_readback::testing::pack_with_count_kind;
use sized_readback::{CountKind, Error};
use std::sync::Arc;
use test_support::{SubjectContext, Test};

pub const TESTS: &[Test] = test_support::tests![
    an_unknown_kind_reads_nothing_and_reports_itself,
    every_kind_of_the_table_packs,
];

/// This subject's context of device 0 (see `test_support::device`).
fn ctx() -> Arc<CudaContext> {
    static CONTEXT: SubjectContext = SubjectContext::new();
    CONTEXT.get()
}

/// Runs the pack with kind value `kind` on an 8-byte count holding `count` (little-endian, so
/// a narrower kind reads its low bytes) and 16 rows: the slot's rows, or its error.
fn pack(kind: u32, count: u64) -> Result<sized_readback::Result<usize>> {
    let ctx = ctx();
    let stream = ctx.default_stream();
    let c = stream.clone_htod(&[count])?;
    let rows = stream.clone_htod(&(0..16u64).collect::<Vec<_>>())?;
    stream.synchronize()?;
    let (cp, _r1) = c.device_ptr(&stream);
    let (rp, _r2) = rows.device_ptr(&stream);
    // SAFETY: both are device memory of ctx, alive until the call returns (it synchronizes);
    // the count is 8 bytes, 8-byte aligned, enough for every kind; 16 rows of u64.
    Ok(unsafe { pack_with_count_kind(&ctx, kind, cp, rp, 16, 8) })
}

/// A kind past the table: the kernel reads no count (a count past the capacity would say
/// otherwise), copies nothing and reports the kind, which the host decodes to the typed error.
/// Before the guard the kernel read 8 bytes as a u64 and packed 5 rows.
fn an_unknown_kind_reads_nothing_and_reports_itself() -> Result<()> {
    for kind in [CountKind::ALL.len() as u32, 77, u32::MAX] {
        let r = pack(kind, 5)?;
        ensure!(
            matches!(r, Err(Error::UnknownCountKind { kind: k }) if k == kind),
            "kind {kind}: {r:?}"
        );
    }
    Ok(())
}

/// Every kind of the table, by its C value, through the same raw launch: 5 rows, and a count of
/// all ones is negative for a signed kind and past the capacity for an unsigned one.
fn every_kind_of_the_table_packs() -> Result<()> {
    for (value, kind) in CountKind::ALL.into_iter().enumerate() {
        let r = pack(value as u32, 5)?;
        ensure!(matches!(r, Ok(5)), "{}: {r:?}", kind.name());
        let r = pack(value as u32, u64::MAX)?;
        let ok = if kind.is_signed() {
            matches!(r, Err(Error::NegativeCount { count: -1 }))
        } else {
            matches!(r, Err(Error::CountExceedsCapacity { capacity: 8, .. }))
        };
        ensure!(ok, "{} of all ones: {r:?}", kind.name());
    }
    Ok(())
}
