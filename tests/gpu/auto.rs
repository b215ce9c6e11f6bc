//! The core's delivery choices on a GPU: `Transport::Auto` (mapped slots, and staged ones for
//! counts that nearly fill a large slot, chosen per enqueue by the count read back last) and
//! the staged transport's fallback to the whole-slot copy, forced by the testing module's hook
//! as a driver older than CUDA 12.8 takes it. Every readback's rows are checked.
use anyhow::{ensure, Result};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use sized_readback::testing::force_whole_slot_fallback;
use sized_readback::{auto, Readback, ReadbackConfig, StagedCopy, Transport};
use std::sync::Arc;
use test_support::{SubjectContext, Test};

pub const TESTS: &[Test] = test_support::tests![
    auto_goes_staged_after_a_nearly_full_count,
    auto_on_a_small_slot_stays_mapped,
    the_forced_whole_slot_fallback_reads_back_exactly,
];

/// This subject's context of device 0 (see `test_support::device`).
fn ctx() -> Arc<CudaContext> {
    static CONTEXT: SubjectContext = SubjectContext::new();
    CONTEXT.get()
}

/// `cap` distinct `f64` on the device, and their host copy.
fn source(stream: &Arc<CudaStream>, cap: usize) -> Result<(CudaSlice<f64>, Vec<f64>)> {
    let host: Vec<f64> = (0..cap).map(|i| i as f64 * 0.5 + 3.0).collect();
    Ok((stream.clone_htod(&host)?, host))
}

/// Reads back `count` rows and checks them; returns the transport the ticket went to.
fn read(
    rb: &Readback<f64>,
    stream: &Arc<CudaStream>,
    (dev, host): &(CudaSlice<f64>, Vec<f64>),
    count: usize,
    seq: u64,
) -> Result<Transport> {
    let n = stream.clone_htod(&[count as i32])?;
    let ticket = rb.enqueue(stream, dev, &n)?;
    let transport = ticket.transport();
    let out = ticket.wait()?;
    ensure!(out.count() == count, "count {} != {count}", out.count());
    ensure!(out[..] == host[..count], "rows of a count of {count}");
    ensure!(
        ticket.seq() == seq && out.seq() == seq,
        "seq {} (readout {}) != {seq}",
        ticket.seq(),
        out.seq()
    );
    Ok(transport)
}

fn auto_goes_staged_after_a_nearly_full_count() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    // 16M f64 rows, 128 MiB: only the full slot has the staged slots' bytes.
    let cap = 16 << 20;
    let src = source(&stream, cap)?;
    let rb =
        Readback::<f64>::with_config(&ctx, ReadbackConfig::new(cap).transport(Transport::Auto))?;
    let info = rb.info();
    ensure!(info.transport == Transport::Auto, "{:?}", info.transport);
    ensure!(
        info.auto_staged_from == Some(cap),
        "{:?}",
        info.auto_staged_from
    );
    // The staged set serves nearly full slots: the whole-slot copy, the copy engine's.
    ensure!(
        info.staged_copy == Some(StagedCopy::Whole),
        "the staged set reports its copy: {:?}",
        info.staged_copy
    );
    // The set follows the count read back last; tickets are numbered across both sets.
    let steps = [
        (5, Transport::Mapped),
        (cap, Transport::Mapped),
        (cap, Transport::Staged),
        (7, Transport::Staged),
        (cap - 1, Transport::Mapped),
        (0, Transport::Mapped),
    ];
    for (i, &(count, want)) in steps.iter().enumerate() {
        let got = read(&rb, &stream, &src, count, i as u64 + 1)?;
        ensure!(
            got == want,
            "step {i} (count {count}): {got:?}, not {want:?}"
        );
    }
    // Held tickets of the chosen set send the next enqueue to the other set.
    let n = stream.clone_htod(&[cap as i32])?;
    let held = [
        rb.enqueue(&stream, &src.0, &n)?,
        rb.enqueue(&stream, &src.0, &n)?,
    ];
    let spill_over = rb.enqueue(&stream, &src.0, &n)?;
    let sets: Vec<Transport> = held.iter().map(|t| t.transport()).collect();
    ensure!(
        sets == [Transport::Mapped, Transport::Mapped]
            && spill_over.transport() == Transport::Staged,
        "{sets:?} then {:?}",
        spill_over.transport()
    );
    ensure!(rb.slots_in_use() == 3, "{} slots in use", rb.slots_in_use());
    for t in held.iter().chain([&spill_over]) {
        ensure!(t.wait()?.count() == cap);
    }
    // The policy's own numbers, as the readback reports them.
    ensure!(auto::STAGED_MIN_BYTES == 128 << 20 && auto::STAGED_MIN_FILL_PERMILLE == 981);
    // A staged copy asked for is the staged set's, and reads back alike (where the driver
    // has the sized copy: CUDA 12.8).
    if !sized_readback::testing::driver_has_conditionals() {
        return Ok(());
    }
    let sized = Readback::<f64>::with_config(
        &ctx,
        ReadbackConfig::new(cap)
            .transport(Transport::Auto)
            .staged_copy(StagedCopy::Sized),
    )?;
    ensure!(sized.info().staged_copy == Some(StagedCopy::Sized));
    for (i, (count, want)) in [(cap, Transport::Mapped), (cap, Transport::Staged)]
        .into_iter()
        .enumerate()
    {
        ensure!(read(&sized, &stream, &src, count, i as u64 + 1)? == want);
    }
    Ok(())
}

fn auto_on_a_small_slot_stays_mapped() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let cap = 4096;
    let src = source(&stream, cap)?;
    let rb =
        Readback::<f64>::with_config(&ctx, ReadbackConfig::new(cap).transport(Transport::Auto))?;
    let info = rb.info();
    ensure!(info.auto_staged_from.is_none() && info.staged_copy.is_none());
    for (i, count) in [cap, cap, 1, cap].into_iter().enumerate() {
        let got = read(&rb, &stream, &src, count, i as u64 + 1)?;
        ensure!(got == Transport::Mapped, "count {count}: {got:?}");
    }
    // 1M rows (8 MiB) is still below the staged slots' bytes.
    rb.grow(1 << 20)?;
    let grown = rb.info();
    ensure!(
        grown.transport == Transport::Auto
            && grown.auto_staged_from.is_none()
            && grown.staged_copy.is_none(),
        "{grown:?}"
    );
    // Growing keeps the transport: a slot large enough gets staged slots.
    rb.grow(16 << 20)?;
    let grown = rb.info();
    ensure!(
        grown.transport == Transport::Auto
            && grown.auto_staged_from == Some(16 << 20)
            && grown.staged_copy == Some(StagedCopy::Whole),
        "{grown:?}"
    );
    Ok(())
}

fn the_forced_whole_slot_fallback_reads_back_exactly() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let cap = 5000;
    let src = source(&stream, cap)?;
    let staged = ReadbackConfig::new(cap).transport(Transport::Staged);
    force_whole_slot_fallback(true);
    let made = (
        Readback::<f64>::with_config(&ctx, staged.clone()),
        Readback::<f64>::with_config(&ctx, staged.clone().staged_copy(StagedCopy::Sized)),
    );
    force_whole_slot_fallback(false);
    let (fallback, explicit) = (made.0?, made.1);
    ensure!(
        fallback.info().staged_copy == Some(StagedCopy::Whole),
        "{:?}",
        fallback.info().staged_copy
    );
    for (i, count) in [0, 1, 17, 4096, cap].into_iter().enumerate() {
        let got = read(&fallback, &stream, &src, count, i as u64 + 1)?;
        ensure!(got == Transport::Staged);
    }
    // The hook stands for a driver's choice under Auto only: an explicit Sized keeps its own
    // check, which this host's driver passes.
    if let Ok(rb) = explicit {
        ensure!(rb.info().staged_copy == Some(StagedCopy::Sized));
    }
    Ok(())
}
