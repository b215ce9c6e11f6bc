//! The simulation step of `csrc/testing/embedding.cu` (`srbe_step`), launched and mirrored on
//! the host, for the embedding tests, the soak's graph lanes and the C API's tests.
use anyhow::{bail, ensure, Result};
use cudarc::driver::{CudaContext, CudaStream};
use sized_readback::testing::{pattern, DeviceBuffer, Kernel, Kernels};
use sized_readback::{Column, ColumnReadout, ColumnSchema, ColumnSource, Error, LaunchShape};
use std::ffi::c_void;
use std::sync::Arc;

/// The count `srbe_step` writes for `key` (csrc/testing/embedding.cu's srbe_count).
pub fn step_count(key: u64, cap: u64) -> i64 {
    if key % 997 == 13 {
        cap as i64 + 1
    } else if key % 991 == 7 {
        -3
    } else {
        (pattern::mix(key) % (cap + 1)) as i64
    }
}

/// Device buffers of one `srbe_step` output (pos f64, id i32, vel [f32; 3], count i32) and
/// its step counter.
pub struct StepBuffers {
    pub pos: DeviceBuffer,
    pub id: DeviceBuffer,
    pub vel: DeviceBuffer,
    pub count: DeviceBuffer,
    pub step: DeviceBuffer,
    pub cap: usize,
}

impl StepBuffers {
    pub fn new(ctx: &Arc<CudaContext>, cap: usize) -> Result<Self> {
        Ok(StepBuffers {
            pos: DeviceBuffer::new_zeroed(ctx, cap * 8)?,
            id: DeviceBuffer::new_zeroed(ctx, cap * 4)?,
            vel: DeviceBuffer::new_zeroed(ctx, cap * 12)?,
            count: DeviceBuffer::new_zeroed(ctx, 8)?,
            step: DeviceBuffer::new_zeroed(ctx, 8)?,
            cap,
        })
    }
    pub fn sources(&self) -> [ColumnSource; 3] {
        [
            ColumnSource {
                ptr: self.pos.ptr(),
                len: self.cap,
            },
            ColumnSource {
                ptr: self.id.ptr(),
                len: self.cap,
            },
            ColumnSource {
                ptr: self.vel.ptr(),
                len: self.cap,
            },
        ]
    }
}

pub struct StepKernels {
    step: Kernel,
    advance: Kernel,
}

impl StepKernels {
    pub fn load(ctx: &Arc<CudaContext>) -> Result<Self> {
        let m = Kernels::load(ctx)?;
        Ok(StepKernels {
            step: m.function("srbe_step")?,
            advance: m.function("srbe_advance")?,
        })
    }
    pub fn step(&self, stream: &CudaStream, b: &StepBuffers, tag: u32) -> Result<()> {
        let (mut pos, mut id, mut vel, mut count, mut step) = (
            b.pos.ptr(),
            b.id.ptr(),
            b.vel.ptr(),
            b.count.ptr(),
            b.step.ptr(),
        );
        let (mut tag, mut cap) = (tag, b.cap as u64);
        let mut args: [*mut c_void; 7] = [
            (&mut pos as *mut u64).cast(),
            (&mut id as *mut u64).cast(),
            (&mut vel as *mut u64).cast(),
            (&mut count as *mut u64).cast(),
            (&mut step as *mut u64).cast(),
            (&mut tag as *mut u32).cast(),
            (&mut cap as *mut u64).cast(),
        ];
        let shape = LaunchShape {
            grid: 16,
            block: 256,
            programmatic: false,
        };
        // SAFETY: srbe_step(double*, int32_t*, float*, int32_t*, const uint64_t*, uint32_t,
        // uint64_t) with matching argument types; the buffers hold cap rows.
        unsafe { self.step.launch(stream.cu_stream(), shape, &mut args)? };
        Ok(())
    }
    pub fn advance(&self, stream: &CudaStream, b: &StepBuffers) -> Result<()> {
        let mut step = b.step.ptr();
        let mut args: [*mut c_void; 1] = [(&mut step as *mut u64).cast()];
        let shape = LaunchShape {
            grid: 1,
            block: 32,
            programmatic: false,
        };
        // SAFETY: srbe_advance(uint64_t*) on an 8-byte buffer.
        unsafe { self.advance.launch(stream.cu_stream(), shape, &mut args)? };
        Ok(())
    }
}

/// The handles of the step's columns: pos, id, vel.
pub type StepColumns = (Column<f64>, Column<i32>, Column<[f32; 3]>);

pub fn step_schema() -> (ColumnSchema, StepColumns) {
    let mut s = ColumnSchema::new();
    let cols = (s.column::<f64>(), s.column::<i32>(), s.column::<[f32; 3]>());
    (s, cols)
}

/// Checks a readback of `srbe_step` with `key` and `tag`, whose result was `r`. Returns
/// whether it was an (expected) count error.
pub fn check_step(
    r: std::result::Result<&ColumnReadout<'_>, Error>,
    cols: StepColumns,
    key: u64,
    tag: u32,
    cap: usize,
) -> Result<bool> {
    let want = step_count(key, cap as u64);
    let out = match r {
        Err(Error::CountExceedsCapacity { count, capacity })
            if want == cap as i64 + 1 && count == want as u64 && capacity == cap =>
        {
            return Ok(true)
        }
        Err(Error::NegativeCount { count: -3 }) if want == -3 => return Ok(true),
        Err(e) => bail!("key {key}: {e} (expected count {want})"),
        Ok(out) => out,
    };
    ensure!(
        out.count() as i64 == want,
        "key {key}: count {} != {want}",
        out.count()
    );
    let (pos, id, vel) = (out.column(cols.0), out.column(cols.1), out.column(cols.2));
    for i in 0..out.count() {
        let ok = pos[i] == i as f64 + 0.25 * key as f64
            && id[i] == (key * 7 + i as u64) as i32
            && vel[i] == [i as f32, key as f32, tag as f32];
        ensure!(ok, "key {key} row {i}: {} {} {:?}", pos[i], id[i], vel[i]);
    }
    Ok(false)
}

/// `Error` is not `Clone`; tests pass errors by value to `check_step`.
pub fn clone_err(e: &Error) -> Error {
    match e {
        Error::CountExceedsCapacity { count, capacity } => Error::CountExceedsCapacity {
            count: *count,
            capacity: *capacity,
        },
        Error::NegativeCount { count } => Error::NegativeCount { count: *count },
        Error::Overrun { seq } => Error::Overrun { seq: *seq },
        other => Error::InvalidConfig {
            reason: other.to_string(),
        },
    }
}
