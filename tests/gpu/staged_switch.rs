//! The staged transport's sized copy (`StagedCopy::Sized`): per slot a graph of the pack and a
//! SWITCH node whose body k copies min(2^k, capacity) rows of every column and the trailer.
//! Every size class boundary for one to three columns of mixed element sizes, counts past the
//! capacity and negative ones; that rows past the count's class are not copied (the host slot
//! is poisoned first); forced `Whole` and `Auto` read alike; many enqueues across slots with
//! the sources kept and changed; which copy each kind of readback reports, and the sized
//! copy's launch (never programmatic). The testing module's `BareSizedCopy` (the same graph
//! without the readback engine, the comparison harness's floor) reads back what a readback
//! reads, with the readback's launch shape, and decodes bad counts alike.
use anyhow::{bail, ensure, Result};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use sized_readback::testing::{
    column_capacity_bytes, driver_has_conditionals, fill_host_slots, load_switch_image,
    BareSizedCopy,
};
use sized_readback::{
    AppendReadback, BucketReadback, Column, ColumnReadback, ColumnReadout, ColumnSchema, Error,
    KernelImage, ReadbackConfig, Source, StagedCopy, Transport,
};
use std::sync::Arc;
use test_support::check::as_bytes;
use test_support::producers::build_beside_other_work;
use test_support::{SubjectContext, Test};

pub const TESTS: &[Test] = test_support::tests![
    the_switch_image_loads,
    each_readback_reports_its_copy,
    every_class_boundary_for_one_to_three_columns,
    rows_past_the_class_are_not_copied,
    bad_counts_keep_their_true_values,
    many_enqueues_across_slots,
    the_bare_sized_copy_reads_back_as_a_readback_does,
    // Alone: its other work and its timing should meet no other test's.
    building_waits_for_no_other_work.exclusive(),
];

/// This subject's context of device 0 (see `test_support::device`).
fn ctx() -> Arc<CudaContext> {
    static CONTEXT: SubjectContext = SubjectContext::new();
    CONTEXT.get()
}

/// The copy `Auto` gives a staged pack of one bucket on this driver.
fn auto_copy() -> StagedCopy {
    if driver_has_conditionals() {
        StagedCopy::Sized
    } else {
        StagedCopy::Whole
    }
}

/// Rows the sized copy moves for a count that copied `n` rows: the class of `n`.
fn class_rows(n: usize, capacity: usize) -> usize {
    let k = if n <= 1 {
        0
    } else {
        usize::BITS - (n - 1).leading_zeros()
    };
    (1usize << k).min(capacity)
}

/// Three source columns of mixed element sizes (f64, i32, [f32; 3]) of `len` rows, their
/// values a function of the row and `seed`, on the device and on the host.
struct Sources {
    a: CudaSlice<f64>,
    b: CudaSlice<i32>,
    c: CudaSlice<[f32; 3]>,
    ha: Vec<f64>,
    hb: Vec<i32>,
    hc: Vec<[f32; 3]>,
}

impl Sources {
    fn new(stream: &Arc<CudaStream>, len: usize, seed: u32) -> Result<Self> {
        let s = seed as f64;
        let ha: Vec<f64> = (0..len).map(|i| i as f64 * 1.5 + s).collect();
        let hb: Vec<i32> = (0..len).map(|i| (i as i32) * 7 - seed as i32).collect();
        let hc: Vec<[f32; 3]> = (0..len)
            .map(|i| [i as f32, seed as f32, -(i as f32) * 0.25])
            .collect();
        Ok(Sources {
            a: stream.clone_htod(&ha)?,
            b: stream.clone_htod(&hb)?,
            c: stream.clone_htod(&hc)?,
            ha,
            hb,
            hc,
        })
    }
}

/// A staged readback of the first `columns` (1 to 3) of the sources' columns, with its
/// column handles and element sizes.
struct Rb {
    rb: ColumnReadback,
    a: Column<f64>,
    b: Option<Column<i32>>,
    c: Option<Column<[f32; 3]>>,
    sizes: Vec<usize>,
}

impl Rb {
    fn new(
        ctx: &Arc<CudaContext>,
        columns: usize,
        capacity: usize,
        slots: usize,
        copy: StagedCopy,
    ) -> Result<Self> {
        let mut schema = ColumnSchema::new();
        let a = schema.column::<f64>();
        let b = (columns > 1).then(|| schema.column::<i32>());
        let c = (columns > 2).then(|| schema.column::<[f32; 3]>());
        let cfg = ReadbackConfig::new(capacity)
            .slots(slots)
            .transport(Transport::Staged)
            .staged_copy(copy);
        Ok(Rb {
            rb: ColumnReadback::new(ctx, &schema, cfg)?,
            a,
            b,
            c,
            sizes: [8usize, 4, 12][..columns].to_vec(),
        })
    }

    /// `src`'s columns bound to this readback's.
    fn sources<'a>(&self, src: &'a Sources) -> Vec<Source<'a>> {
        let mut v = vec![self.a.source(&src.a)];
        v.extend(self.b.map(|b| b.source(&src.b)));
        v.extend(self.c.map(|c| c.source(&src.c)));
        v
    }
}

/// Enqueues the readback of `count` rows of `src` (its first `columns` columns) and checks
/// the count and every row of every column; hands the readout to `more`.
fn roundtrip(
    rb: &Rb,
    stream: &Arc<CudaStream>,
    src: &Sources,
    count: usize,
    more: impl FnOnce(&ColumnReadout<'_>) -> Result<()>,
) -> Result<()> {
    let columns = rb.sizes.len();
    let n = stream.clone_htod(&[count as u64])?;
    let ticket = rb.rb.enqueue(stream, &rb.sources(src), &n)?;
    let out = ticket.wait()?;
    ensure!(out.count() == count, "count {} != {count}", out.count());
    ensure!(
        out.column_bytes(0)? == as_bytes(&src.ha[..count]),
        "column 0 of {count} rows"
    );
    if columns > 1 {
        ensure!(
            out.column_bytes(1)? == as_bytes(&src.hb[..count]),
            "column 1 of {count} rows"
        );
    }
    if columns > 2 {
        ensure!(
            out.column_bytes(2)? == as_bytes(&src.hc[..count]),
            "column 2 of {count} rows"
        );
    }
    more(&out)
}

/// 0, 1, and 2^k - 1, 2^k, 2^k + 1 up to `capacity`, then the capacity itself.
fn class_boundaries(capacity: usize) -> Vec<usize> {
    let mut v = vec![0, 1];
    let mut p = 2;
    while p <= capacity {
        v.extend([p - 1, p, p + 1]);
        p *= 2;
    }
    v.push(capacity - 1);
    v.push(capacity);
    v.retain(|&n| n <= capacity);
    v.sort_unstable();
    v.dedup();
    v
}

/// The sized copy's kernel image loads on its own (its `cudaGraphSetConditional` is resolved by
/// the driver at load), the image this device is served from every set, with or without
/// `CUDA_FORCE_PTX_JIT` (then the PTX, ISA 8.7, is JIT-compiled).
fn the_switch_image_loads() -> Result<()> {
    if !driver_has_conditionals() {
        return Ok(()); // the library never loads it on such a driver
    }
    let ctx = ctx();
    let (image, ptx) = load_switch_image(&ctx)?;
    let library = KernelImage::for_context(&ctx)?;
    ensure!(
        (image.kind(), image.arch()) == (library.kind(), library.arch()),
        "switch set {image}, library set {library}"
    );
    ensure!(
        ptx == image.arch() as i32,
        "srb_pack_switch was compiled from compute_{ptx}, the image is {image}"
    );
    Ok(())
}

fn each_readback_reports_its_copy() -> Result<()> {
    let ctx = ctx();
    let staged = ReadbackConfig::new(1000).transport(Transport::Staged);
    let mut one = ColumnSchema::new();
    one.column::<f64>();
    let info = |cfg: ReadbackConfig| -> Result<Option<StagedCopy>> {
        Ok(ColumnReadback::new(&ctx, &one, cfg)?.info().staged_copy)
    };
    ensure!(info(staged.clone())? == Some(auto_copy()));
    ensure!(info(staged.clone().staged_copy(StagedCopy::Whole))? == Some(StagedCopy::Whole));
    ensure!(
        info(ReadbackConfig::new(1000))?.is_none(),
        "mapped copies nothing"
    );
    // This host's driver (R580, CUDA 13.0) has the conditionals: Sized is granted.
    if driver_has_conditionals() {
        let s = info(staged.clone().staged_copy(StagedCopy::Sized))?;
        ensure!(s == Some(StagedCopy::Sized), "{s:?}");
    } else {
        match info(staged.clone().staged_copy(StagedCopy::Sized)) {
            Err(e) => match e.downcast_ref::<Error>() {
                Some(Error::SizedCopyUnavailable { reason }) => {
                    ensure!(reason.contains("12080"), "{reason}")
                }
                other => bail!("{other:?}"),
            },
            Ok(c) => bail!("Sized granted on an old driver: {c:?}"),
        }
    }
    // The sized copy's pack runs in a graph, never programmatically, and its launch shape says
    // so. Programmatic launch forced on takes the whole-slot copy under Auto (on a GPU that has
    // it), and is refused with an explicit Sized on every driver.
    if driver_has_conditionals() {
        let info = ColumnReadback::new(&ctx, &one, staged.clone())?.info();
        ensure!(info.staged_copy == Some(StagedCopy::Sized));
        ensure!(!info.launch_shape.programmatic, "{:?}", info.launch_shape);
    }
    match ColumnReadback::new(&ctx, &one, staged.clone().programmatic_launch(true)) {
        Ok(rb) => {
            let info = rb.info();
            ensure!(
                info.staged_copy == Some(StagedCopy::Whole) && info.launch_shape.programmatic,
                "{:?} {:?}",
                info.staged_copy,
                info.launch_shape
            );
        }
        Err(Error::InvalidConfig { reason }) if reason.contains("compute capability 9.0") => {}
        Err(e) => bail!("Auto with programmatic launch: {e}"),
    }
    let forced = staged.clone().programmatic_launch(true);
    match ColumnReadback::new(&ctx, &one, forced.staged_copy(StagedCopy::Sized)) {
        Err(Error::SizedCopyUnavailable { reason }) => {
            ensure!(reason.contains("programmatically"), "{reason}")
        }
        Err(e) => bail!("Sized with programmatic launch: {e}"),
        Ok(rb) => bail!(
            "Sized with programmatic launch: {:?}",
            rb.info().staged_copy
        ),
    }
    // Appends and buckets copy the whole slot, and say so; an explicit Sized is refused.
    let app = AppendReadback::new(&ctx, &one, staged.clone())?;
    ensure!(app.info().staged_copy == Some(StagedCopy::Whole));
    let buckets = BucketReadback::new(&ctx, &one, staged.clone().buckets(4))?;
    ensure!(buckets.info().staged_copy == Some(StagedCopy::Whole));
    let sized = staged.clone().staged_copy(StagedCopy::Sized);
    match AppendReadback::new(&ctx, &one, sized.clone()) {
        Err(Error::SizedCopyUnavailable { reason }) => {
            ensure!(reason.contains("append"), "{reason}")
        }
        other => bail!("append with Sized: {other:?}"),
    }
    match BucketReadback::new(&ctx, &one, sized.buckets(4)) {
        Err(Error::SizedCopyUnavailable { reason }) => {
            ensure!(reason.contains("bucketed"), "{reason}")
        }
        other => bail!("buckets with Sized: {other:?}"),
    }
    Ok(())
}

fn every_class_boundary_for_one_to_three_columns() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    for capacity in [1000usize, 1024, 1] {
        let src = Sources::new(&stream, capacity + 10, 3)?;
        for columns in 1..=3 {
            let auto = Rb::new(&ctx, columns, capacity, 2, StagedCopy::Auto)?;
            let whole = Rb::new(&ctx, columns, capacity, 2, StagedCopy::Whole)?;
            ensure!(auto.rb.info().staged_copy == Some(auto_copy()));
            for count in class_boundaries(capacity) {
                let mut seen: Vec<Vec<u8>> = Vec::new();
                for rb in [&auto, &whole] {
                    roundtrip(rb, &stream, &src, count, |out| {
                        let mut bytes = Vec::new();
                        for c in 0..columns {
                            bytes.extend_from_slice(out.column_bytes(c)?);
                        }
                        seen.push(bytes);
                        Ok(())
                    })
                    .map_err(|e| {
                        e.context(format!(
                            "capacity {capacity}, {columns} column(s), count {count}, {:?}",
                            rb.rb.info().staged_copy
                        ))
                    })?;
                }
                ensure!(seen[0] == seen[1], "Auto and Whole differ at {count}");
            }
        }
    }
    Ok(())
}

fn rows_past_the_class_are_not_copied() -> Result<()> {
    if !driver_has_conditionals() {
        return Ok(()); // the whole-slot copy writes every row; nothing to tell apart
    }
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    const POISON: u8 = 0xAB;
    for capacity in [1000usize, 4096] {
        let src = Sources::new(&stream, capacity, 5)?;
        for columns in 1..=3 {
            for copy in [StagedCopy::Sized, StagedCopy::Whole] {
                // One slot: the poison goes in while no readback holds it.
                let rb = Rb::new(&ctx, columns, capacity, 1, copy)?;
                for count in class_boundaries(capacity) {
                    // SAFETY: the slot's previous readback was waited for and its ticket dropped.
                    unsafe { fill_host_slots(&rb.rb, POISON) };
                    roundtrip(&rb, &stream, &src, count, |out| {
                        let rows = class_rows(count, capacity);
                        for (c, &size) in rb.sizes.iter().enumerate() {
                            let all = column_capacity_bytes(out, c).expect("a column");
                            ensure!(all.len() == capacity * size);
                            let past = &all[rows * size..];
                            let untouched = past.iter().all(|&b| b == POISON);
                            match copy {
                                // Rows past the class stay as they were (a copy of the class
                                // never reaches them: the next region is 16 bytes or more
                                // away unless the class holds the capacity).
                                StagedCopy::Sized => ensure!(
                                    untouched,
                                    "column {c}: rows {rows}.. of {capacity} were copied \
                                     (count {count})"
                                ),
                                // The whole slot arrives: the device slot's bytes, never the
                                // host's poison throughout.
                                _ => ensure!(
                                    past.is_empty() || !untouched,
                                    "column {c}: the whole-slot copy left rows {rows}.. alone"
                                ),
                            }
                            // The class's rows past the count are the device slot's, not poison.
                            let copied = &all[count * size..rows * size];
                            ensure!(
                                copied.is_empty() || copied.iter().any(|&b| b != POISON),
                                "column {c}: rows {count}..{rows} were not copied"
                            );
                        }
                        Ok(())
                    })
                    .map_err(|e| {
                        e.context(format!("{copy:?}, {columns} column(s), count {count}"))
                    })?;
                }
            }
        }
    }
    Ok(())
}

fn bad_counts_keep_their_true_values() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let capacity = 1000;
    let src = Sources::new(&stream, capacity + 100, 9)?;
    for copy in [StagedCopy::Auto, StagedCopy::Whole] {
        let rb = Rb::new(&ctx, 2, capacity, 2, copy)?;
        let sources = rb.sources(&src);
        // Past the capacity (the sources are longer): the true count, nothing copied.
        for count in [capacity as i64 + 1, capacity as i64 + 50] {
            let n = stream.clone_htod(&[count])?;
            match rb.rb.enqueue(&stream, &sources, &n)?.wait() {
                Err(Error::CountExceedsCapacity {
                    count: c,
                    capacity: cap,
                }) => ensure!(
                    (c, cap) == (count as u64, capacity),
                    "{copy:?}: {c} of {cap}"
                ),
                other => bail!("{copy:?} count {count}: {other:?}"),
            }
        }
        let n = stream.clone_htod(&[-3i32])?;
        match rb.rb.enqueue(&stream, &sources, &n)?.wait() {
            Err(Error::NegativeCount { count: -3 }) => {}
            other => bail!("{copy:?} count -3: {other:?}"),
        }
        // Past a source: the column and its length.
        let short = stream.clone_htod(&src.hb[..10])?;
        let n = stream.clone_htod(&[20u32])?;
        let b = rb.b.expect("two columns");
        match rb
            .rb
            .enqueue(&stream, &[rb.a.source(&src.a), b.source(&short)], &n)?
            .wait()
        {
            Err(Error::CountExceedsSource {
                count: 20,
                column: 1,
                source_len: 10,
            }) => {}
            other => bail!("{copy:?} past a source: {other:?}"),
        }
        // And the next readback of the same slots is whole again.
        roundtrip(&rb, &stream, &src, 777, |_| Ok(()))?;
        // Grown to the count that did not fit: new slots, new graphs, the same copy.
        rb.rb.grow(capacity + 50)?;
        ensure!(rb.rb.info().staged_copy == Some(copy_of(copy)));
        roundtrip(&rb, &stream, &src, capacity + 50, |_| Ok(()))?;
    }
    Ok(())
}

/// The copy a request gives a staged pack of one bucket on this driver.
fn copy_of(request: StagedCopy) -> StagedCopy {
    match request {
        StagedCopy::Auto => auto_copy(),
        other => other,
    }
}

fn many_enqueues_across_slots() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let other = ctx.new_stream()?;
    let capacity = 5000;
    let first = Sources::new(&stream, capacity, 11)?;
    let second = Sources::new(&stream, capacity, 12)?;
    let rb = Rb::new(&ctx, 3, capacity, 3, StagedCopy::Auto)?;
    ensure!(rb.rb.info().staged_copy == Some(auto_copy()));
    // Two tickets held at a time, so the three slots rotate; the sources alternate every third
    // enqueue, the count changes every time, and every fourth goes on another stream.
    let mut held = std::collections::VecDeque::new();
    for i in 0..120usize {
        let src = if (i / 3) % 2 == 0 { &first } else { &second };
        let count = (i * 977 + i * i * 13) % (capacity + 1);
        let s = if i % 4 == 3 { &other } else { &stream };
        let n = s.clone_htod(&[count as u64])?;
        let ticket = rb.rb.enqueue(s, &rb.sources(src), &n)?;
        held.push_back((ticket, src, count, i));
        if held.len() == 2 {
            let (t, src, count, i) = held.pop_front().expect("two held");
            let out = t.wait()?;
            ensure!(out.count() == count, "enqueue {i}: count {}", out.count());
            ensure!(
                out.column_bytes(0)? == as_bytes(&src.ha[..count]),
                "enqueue {i}: column 0"
            );
            ensure!(
                out.column_bytes(1)? == as_bytes(&src.hb[..count]),
                "enqueue {i}: column 1"
            );
            ensure!(
                out.column_bytes(2)? == as_bytes(&src.hc[..count]),
                "enqueue {i}: column 2"
            );
        }
    }
    for (t, src, count, i) in held {
        let out = t.wait()?;
        ensure!(out.count() == count, "enqueue {i}: count {}", out.count());
        ensure!(
            out.column_bytes(2)? == as_bytes(&src.hc[..count]),
            "enqueue {i}: column 2"
        );
    }
    Ok(())
}

/// `BareSizedCopy`: on a driver without graph conditionals it is unavailable, as an explicit
/// sized readback is; elsewhere every class boundary reads back the source's rows and count
/// (each launch waited for on its stream; launches alternate between two slots and two sources,
/// so rows read from the other slot would be the other source's), its launch shape is a sized
/// readback's of the same capacity, and counts past the capacity, past the source or negative
/// decode to a readback's errors.
fn the_bare_sized_copy_reads_back_as_a_readback_does() -> Result<()> {
    use cudarc::driver::DevicePtr;
    let ctx = ctx();
    ctx.bind_to_thread()?;
    let capacity = 1000;
    if !driver_has_conditionals() {
        match BareSizedCopy::new(&ctx, capacity, 2) {
            Err(Error::SizedCopyUnavailable { .. }) => return Ok(()),
            other => bail!("without conditionals: {other:?}"),
        }
    }
    let stream = ctx.new_stream()?;
    ensure!(matches!(
        BareSizedCopy::new(&ctx, capacity, 0),
        Err(Error::InvalidConfig { .. })
    ));
    let src = [
        Sources::new(&stream, capacity + 100, 3)?,
        Sources::new(&stream, capacity + 100, 4)?,
    ];
    let mut bare = BareSizedCopy::new(&ctx, capacity, 2)?;
    let rb = Rb::new(&ctx, 1, capacity, 2, StagedCopy::Sized)?;
    ensure!(
        bare.launch_shape() == rb.rb.info().launch_shape,
        "bare {:?}, readback {:?}",
        bare.launch_shape(),
        rb.rb.info().launch_shape
    );
    ensure!(bare.capacity() == capacity);
    // Before any launch the zeroed slot has no trailer.
    // SAFETY: no launch yet.
    ensure!(bare.count().is_err() && unsafe { bare.rows() }.is_err());
    let rows = [
        src[0].a.device_ptr(&stream).0,
        src[1].a.device_ptr(&stream).0,
    ];
    let mut seq = 0u64;
    // Launches the next slot's copy from source `seq % 2` and returns that source's rows.
    let mut run = |bare: &mut BareSizedCopy, count: i32, len: usize| -> Result<&[f64]> {
        seq += 1;
        let which = (seq % 2) as usize;
        let n = stream.clone_htod(&[count])?;
        let count_ptr = n.device_ptr(&stream).0;
        // SAFETY: the context is current and `stream` is its; each source holds capacity + 100
        // f64 and `n` one i32, all alive until the stream synchronize below, which also
        // finishes the launch before the next one.
        unsafe { bare.launch(stream.cu_stream(), rows[which], len, count_ptr, seq)? };
        stream.synchronize()?;
        ensure!(
            bare.last_slot() == ((seq - 1) % 2) as usize,
            "launch {seq} took slot {}",
            bare.last_slot()
        );
        Ok(&src[which].ha)
    };
    for count in class_boundaries(capacity) {
        let want = run(&mut bare, count as i32, capacity + 100)?;
        ensure!(
            bare.count()? == count,
            "count {:?} != {count}",
            bare.count()
        );
        // SAFETY: `run` synchronized the stream after the launch.
        let rows = unsafe { bare.rows()? };
        ensure!(rows == &want[..count], "rows of count {count} differ");
    }
    run(&mut bare, capacity as i32 + 1, capacity + 100)?;
    match bare.count() {
        Err(Error::CountExceedsCapacity { count, capacity: c }) => {
            ensure!(
                (count, c) == (capacity as u64 + 1, capacity),
                "{count} of {c}"
            )
        }
        other => bail!("past the capacity: {other:?}"),
    }
    run(&mut bare, 20, 10)?;
    match bare.count() {
        Err(Error::CountExceedsSource {
            count: 20,
            column: 0,
            source_len: 10,
        }) => {}
        other => bail!("past the source: {other:?}"),
    }
    run(&mut bare, -3, capacity)?;
    // SAFETY: `run` synchronized the stream after the launch (and below).
    match unsafe { bare.rows() } {
        Err(Error::NegativeCount { count: -3 }) => {}
        other => bail!("negative: {other:?}"),
    }
    let want = run(&mut bare, 17, capacity)?;
    // SAFETY: as above.
    let rows = unsafe { bare.rows()? };
    ensure!(rows == &want[..17]);
    Ok(())
}

/// Building a staged sized readback waits for no other work of the context, on a context object
/// that holds no cudarc stream (as a C or Python caller's does): its graphs upload on the
/// library's own stream, not cudarc's `new_stream` (which synchronizes such a context), and its
/// buffers are zeroed off the legacy stream (which waits for every blocking stream). The
/// readback built there reads back.
fn building_waits_for_no_other_work() -> Result<()> {
    let copy = auto_copy();
    let seen = build_beside_other_work(&ctx(), |own| Rb::new(own, 2, 1000, 2, copy))?;
    ensure!(
        seen.other_work_still_running,
        "the build ({copy:?}) waited for other work: it took {:?}",
        seen.took
    );
    let own = sized_readback::device::open(0)?;
    let rb = Rb::new(&own, 2, 1000, 2, copy)?;
    let stream = own.new_stream()?;
    let src = Sources::new(&stream, 1000, 5)?;
    roundtrip(&rb, &stream, &src, 777, |_| Ok(()))
}
