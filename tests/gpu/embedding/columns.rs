//! Several columns, one count.
use super::ctx;
use anyhow::{ensure, Context as _, Result};
use cudarc::driver::{CudaSlice, CudaStream, CudaView};
use sized_readback::testing::pattern;
use sized_readback::{ColumnReadback, ColumnSchema, Element, Error, ReadbackConfig};
use std::sync::Arc;
use std::time::Duration;
use test_support::check::{as_bytes, expect_err};
use test_support::step::*;
use test_support::TRANSPORTS;

/// A patterned device buffer of `len` elements of T starting `offset` bytes in (so the
/// column's source may be unaligned), and its bytes on the host.
struct Patterned {
    dev: CudaSlice<u8>,
    host: Vec<u8>,
    offset: usize,
    len: usize,
}

impl Patterned {
    fn new<T: Element>(
        stream: &Arc<CudaStream>,
        len: usize,
        offset: usize,
        seed: u64,
    ) -> Result<Self> {
        let host = pattern::bytes(seed, offset + len * std::mem::size_of::<T>());
        let dev = stream.clone_htod(&host)?;
        Ok(Patterned {
            dev,
            host,
            offset,
            len,
        })
    }
    fn view<T: Element>(&self) -> Result<CudaView<'_, T>> {
        // SAFETY: the buffer holds offset + len * size_of::<T>() bytes; T is valid for any bits.
        unsafe { self.dev.slice(self.offset..).transmute::<T>(self.len) }.context("transmute")
    }
    fn want<T>(&self, count: usize) -> &[u8] {
        &self.host[self.offset..self.offset + count * std::mem::size_of::<T>()]
    }
}

pub(super) fn columns_mixed_types() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let cap = 3000;
    let mut schema = ColumnSchema::new();
    let pos = schema.column::<f64>();
    let id = schema.column::<i32>();
    let vel = schema.column::<[f32; 3]>();
    let flag = schema.column::<u8>();
    let p = Patterned::new::<f64>(&stream, cap, 0, 11)?;
    let i = Patterned::new::<i32>(&stream, cap + 5, 4, 12)?;
    let v = Patterned::new::<[f32; 3]>(&stream, cap, 1, 13)?; // unaligned source
    let f = Patterned::new::<u8>(&stream, cap, 3, 14)?;
    let (pv, iv, vv, fv) = (
        p.view::<f64>()?,
        i.view::<i32>()?,
        v.view::<[f32; 3]>()?,
        f.view::<u8>()?,
    );
    for t in TRANSPORTS {
        let rb = ColumnReadback::new(&ctx, &schema, ReadbackConfig::new(cap).transport(t))?;
        ensure!(rb.info().layout.column_offsets().len() == 4);
        for count in [0usize, 1, 17, 1000, 2999, 3000] {
            let n = stream.clone_htod(&[count as u64])?;
            // Bound in another order than declared: the handles say which column is which.
            let sources = [
                vel.source(&vv),
                pos.source(&pv),
                flag.source(&fv),
                id.source(&iv),
            ];
            let ticket = rb.enqueue(&stream, &sources, &n)?;
            let out = ticket.wait()?;
            ensure!(
                out.count() == count,
                "{t:?}: count {} != {count}",
                out.count()
            );
            ensure!(
                as_bytes(out.column(pos)) == p.want::<f64>(count),
                "{t:?} {count}: pos"
            );
            ensure!(
                as_bytes(out.column(id)) == i.want::<i32>(count),
                "{t:?} {count}: id"
            );
            ensure!(
                as_bytes(out.column(vel)) == v.want::<[f32; 3]>(count),
                "{t:?} {count}: vel"
            );
            ensure!(
                as_bytes(out.column(flag)) == f.want::<u8>(count),
                "{t:?} {count}: flag"
            );
            ensure!(out.column_as::<i32>(1)?.len() == count);
            ensure!(out.column_bytes(2)?.len() == 12 * count);
        }
    }
    Ok(())
}

pub(super) fn columns_count_rules() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let cap = 64;
    let mut schema = ColumnSchema::new();
    let a = schema.column::<f64>();
    let b = schema.column::<u16>();
    let c = schema.column::<[u8; 3]>();
    let pa = Patterned::new::<f64>(&stream, cap, 0, 1)?;
    let pb = Patterned::new::<u16>(&stream, 40, 2, 2)?; // the short column
    let pc = Patterned::new::<[u8; 3]>(&stream, cap, 0, 3)?;
    let (va, vb, vc) = (pa.view::<f64>()?, pb.view::<u16>()?, pc.view::<[u8; 3]>()?);
    for t in TRANSPORTS {
        let rb = ColumnReadback::new(&ctx, &schema, ReadbackConfig::new(cap).transport(t))?;
        let src = || [a.source(&va), b.source(&vb), c.source(&vc)];
        let over = stream.clone_htod(&[65i64])?;
        let tk = rb.enqueue(&stream, &src(), &over)?;
        expect_err(tk.wait(), "over capacity", |e| {
            matches!(
                e,
                Error::CountExceedsCapacity {
                    count: 65,
                    capacity: 64
                }
            )
        })?;
        drop(tk);
        let neg = stream.clone_htod(&[-5i32])?;
        let tk = rb.enqueue(&stream, &src(), &neg)?;
        expect_err(tk.wait(), "negative", |e| {
            matches!(e, Error::NegativeCount { count: -5 })
        })?;
        drop(tk);
        let past = stream.clone_htod(&[41u32])?;
        let tk = rb.enqueue(&stream, &src(), &past)?;
        expect_err(tk.wait(), "past the short column", |e| {
            matches!(
                e,
                Error::CountExceedsSource {
                    count: 41,
                    column: 1,
                    source_len: 40
                }
            )
        })?;
        drop(tk);
        let fits = stream.clone_htod(&[40u64])?;
        let tk = rb.enqueue(&stream, &src(), &fits)?;
        let out = tk.wait()?;
        ensure!(out.count() == 40);
        ensure!(as_bytes(out.column(a)) == pa.want::<f64>(40));
        ensure!(as_bytes(out.column(b)) == pb.want::<u16>(40));
        ensure!(as_bytes(out.column(c)) == pc.want::<[u8; 3]>(40));
    }
    Ok(())
}

pub(super) fn columns_api_misuse() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    expect_err(
        ColumnReadback::new(&ctx, &ColumnSchema::new(), ReadbackConfig::new(8)),
        "no columns",
        |e| matches!(e, Error::InvalidConfig { .. }),
    )?;
    let mut nine = ColumnSchema::new();
    for _ in 0..9 {
        nine.column::<u8>();
    }
    expect_err(
        ColumnReadback::new(&ctx, &nine, ReadbackConfig::new(8)),
        "nine columns",
        |e| matches!(e, Error::InvalidConfig { .. }),
    )?;
    let mut schema = ColumnSchema::new();
    let x = schema.column::<f32>();
    let y = schema.column::<i64>();
    let mut other = ColumnSchema::new();
    let z = other.column::<f32>();
    let rb = ColumnReadback::new(&ctx, &schema, ReadbackConfig::new(8))?;
    let dx = stream.clone_htod(&[1.5f32; 8])?;
    let dy = stream.clone_htod(&[7i64; 8])?;
    let n = stream.clone_htod(&[3i32])?;
    let is_config = |e: &Error| matches!(e, Error::SchemaMismatch { .. });
    expect_err(
        rb.enqueue(&stream, &[x.source(&dx)], &n),
        "missing column",
        is_config,
    )?;
    expect_err(
        rb.enqueue(&stream, &[x.source(&dx), x.source(&dx), y.source(&dy)], &n),
        "column bound twice",
        is_config,
    )?;
    expect_err(
        rb.enqueue(&stream, &[z.source(&dx), y.source(&dy)], &n),
        "another schema's handle",
        is_config,
    )?;
    let tk = rb.enqueue(&stream, &[y.source(&dy), x.source(&dx)], &n)?;
    let out = tk.wait()?;
    ensure!(out.column(x) == [1.5f32; 3]);
    ensure!(out.column(y) == [7i64; 3]);
    expect_err(out.column_as::<u32>(0), "f32 column as u32", is_config)?;
    expect_err(out.column_as::<f64>(1), "i64 column as f64", is_config)?;
    expect_err(out.column_as::<f32>(2), "no column 2", is_config)?;
    expect_err(out.try_column(z), "foreign handle", is_config)?;
    ensure!(out.column_bytes(1)?.len() == 24);
    Ok(())
}

/// A clone of a schema shares its identity, so its handles pass the identity check; the
/// enqueue must still refuse a buffer whose element type is not the column's (a `u8` buffer
/// bound to a `[f64; 4]` column would make the kernel read 32 times the buffer's length).
/// Also: `wait_timeout(Duration::MAX)` means no limit.
pub(super) fn columns_cloned_schema_types_are_checked() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let cap = 64;
    let mut a = ColumnSchema::new();
    let mut b = a.clone();
    let wide = a.column::<[f64; 4]>();
    let narrow = b.column::<u8>();
    let rb = ColumnReadback::new(&ctx, &a, ReadbackConfig::new(cap))?;
    let d_u8 = stream.alloc_zeros::<u8>(cap)?;
    let n = stream.clone_htod(&[cap as i32])?;
    expect_err(
        rb.enqueue(&stream, &[narrow.source(&d_u8)], &n),
        "u8 buffer for a [f64; 4] column",
        |e| matches!(e, Error::SchemaMismatch { reason } if reason.contains("[f64; 4]")),
    )?;
    ensure!(rb.slots_in_use() == 0, "a refused enqueue holds no slot");
    // Same size, other type: refused as well.
    let mut d = ColumnSchema::new();
    let mut d_clone = d.clone();
    let _ = d.column::<[f64; 4]>();
    let as_u64 = d_clone.column::<[u64; 4]>(); // column 0 of the same identity
    let rb_d = ColumnReadback::new(&ctx, &d, ReadbackConfig::new(cap))?;
    let d_u64 = stream.alloc_zeros::<[u64; 4]>(cap)?;
    expect_err(
        rb_d.enqueue(&stream, &[as_u64.source(&d_u64)], &n),
        "[u64; 4] buffer for a [f64; 4] column",
        |e| matches!(e, Error::SchemaMismatch { reason } if reason.contains("[u64; 4]")),
    )?;
    // A clone that declares more columns: the original's handle of column 0 and the clone's
    // of column 1, each with its column's type, are accepted; b's u8 handle is refused.
    let mut c = a.clone();
    let flag = c.column::<u8>();
    let rb_c = ColumnReadback::new(&ctx, &c, ReadbackConfig::new(cap))?;
    let rows: Vec<[f64; 4]> = (0..cap).map(|i| [i as f64, 0.5, -1.0, 1e300]).collect();
    let d_wide = stream.clone_htod(&rows)?;
    let d_flag = stream.clone_htod(&vec![7u8; cap])?;
    expect_err(
        rb_c.enqueue(&stream, &[narrow.source(&d_u8), flag.source(&d_flag)], &n),
        "b's u8 handle for c's [f64; 4] column 0",
        |e| matches!(e, Error::SchemaMismatch { reason } if reason.contains("column 0")),
    )?;
    let tk = rb_c.enqueue(&stream, &[wide.source(&d_wide), flag.source(&d_flag)], &n)?;
    let out = tk.wait_timeout(Duration::MAX)?;
    ensure!(out.count() == cap, "count {}", out.count());
    ensure!(out.column(wide) == rows.as_slice(), "wide column");
    ensure!(out.column(flag) == vec![7u8; cap].as_slice(), "flag column");
    Ok(())
}

pub(super) fn columns_raw_after_an_event() -> Result<()> {
    let ctx = ctx();
    let k = StepKernels::load(&ctx)?;
    let compute = ctx.new_stream()?;
    let copy = ctx.new_stream()?;
    let done = ctx.new_event(None)?;
    let (schema, cols) = step_schema();
    let cap = 5000;
    let b = StepBuffers::new(&ctx, cap)?;
    let rb = ColumnReadback::new(&ctx, &schema, ReadbackConfig::new(cap).slots(3))?;
    let mut errors = 0;
    for key in 0..200u64 {
        // The producer's key is 2 * step + tag: the tag is the key's parity, and the step
        // counter (zeroed) moves on after each odd key, on `compute`, so each producer reads
        // its own step. A host upload would need a context-wide synchronization, which fails
        // while another test's stream is capturing.
        k.step(&compute, &b, (key % 2) as u32)?;
        done.record(&compute)?;
        if key % 2 == 1 {
            k.advance(&compute, &b)?;
        }
        // SAFETY: the buffers outlive the wait below; `done` orders the pack after the
        // producer, and the next producer runs only after this wait.
        let tk = unsafe {
            rb.enqueue_raw(
                &copy,
                Some(&done),
                &b.sources(),
                sized_readback::RawCount::i32(b.count.ptr()),
            )?
        };
        let r = tk.wait();
        errors += check_step(
            r.as_ref().map_err(clone_err),
            cols,
            key,
            (key % 2) as u32,
            cap,
        )? as usize;
    }
    // Keys 7 (negative) and 13 (over capacity) are error keys; check_step matched each.
    let want = (0..200u64)
        .filter(|&k| !(0..=cap as i64).contains(&step_count(k, cap as u64)))
        .count();
    ensure!(
        errors == want && want == 2,
        "count errors {errors} != {want}"
    );
    Ok(())
}
