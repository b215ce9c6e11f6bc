//! Sized launch through the C ABI: a body callback records each class's kernel, launches wait
//! by number with the count and class they ran, a count past the capacity runs nothing and
//! reports its true count; bad arguments are typed errors, with or without a GPU.
use super::{ctx, last_error};
use anyhow::{ensure, Result};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use sized_readback_capi as capi;
use std::ffi::c_void;
use std::sync::Arc;

/// What the body callback needs: the test kernel and the output buffers' addresses (also the
/// exact-grid form's test, `sized_grid.rs`).
pub(crate) struct Body {
    pub(crate) kernel: srb::testing::Kernel,
    pub(crate) out: u64,
    pub(crate) meta: u64,
    pub(crate) calls: u32,
}

/// The device side of a C sized-launch test: a stream, the count, the test body's output and
/// meta words, and the body callback's state (also the exact-grid form's test).
pub(crate) struct Rig {
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) count: CudaSlice<i32>,
    pub(crate) meta: CudaSlice<u64>,
    pub(crate) body: Body,
    _out: CudaSlice<u64>,
}

impl Rig {
    /// The buffers for counts up to `capacity`, and the test body over them.
    pub(crate) fn new(capacity: usize) -> Result<Self> {
        let ctx = ctx();
        let stream = ctx.new_stream()?;
        let count = stream.alloc_zeros::<i32>(1)?;
        let out = stream.alloc_zeros::<u64>(capacity + 64)?;
        let meta = stream.alloc_zeros::<u64>(4)?;
        let body = Body {
            kernel: srb::testing::Kernels::load(&ctx)?.function("srb_test_sized_body")?,
            out: out.device_ptr(&stream).0,
            meta: meta.device_ptr(&stream).0,
            calls: 0,
        };
        Ok(Rig {
            stream,
            count,
            meta,
            body,
            _out: out,
        })
    }
    pub(crate) fn count_ptr(&self) -> capi::srb_devptr {
        self.count.device_ptr(&self.stream).0
    }
    /// The body callback's user pointer: this rig's body, which outlives a create call.
    pub(crate) fn user(&mut self) -> *mut c_void {
        (&mut self.body as *mut Body).cast()
    }
    /// Writes each of `counts` and enqueues `l` after it: the launches' numbers.
    pub(crate) fn enqueue_counts(
        &mut self,
        l: *mut capi::srb_sized_launch,
        counts: &[i32],
    ) -> Result<Vec<u64>> {
        let raw: *mut capi::CUstream_st = self.stream.cu_stream().cast();
        let mut seqs = Vec::new();
        for &n in counts {
            self.stream.memcpy_htod(&[n], &mut self.count)?;
            let mut seq = 0u64;
            // SAFETY: a live handle and stream; an out-pointer.
            let code = unsafe { capi::srb_sized_launch_enqueue(l, raw, &mut seq) };
            ensure!(
                code == capi::SRB_OK && seq > 0,
                "enqueue: {code} {}",
                last_error()
            );
            seqs.push(seq);
        }
        Ok(seqs)
    }
}

/// Whether a create's `code` says sized launches are unavailable, which only a driver without
/// conditionals may say.
pub(crate) fn unavailable(code: i32) -> Result<bool> {
    if code != capi::SRB_ERR_SIZED_LAUNCH_UNAVAILABLE {
        return Ok(false);
    }
    ensure!(
        !srb::testing::driver_has_conditionals(),
        "unavailable on a driver with conditionals: {}",
        last_error()
    );
    Ok(true)
}

/// The body callback: srb_test_sized_body with a grid of n_max threads (256 per block).
pub(crate) unsafe extern "C" fn record_body(
    user: *mut c_void,
    stream: *mut capi::CUstream_st,
    class_index: u32,
    n_max: u64,
    count: capi::srb_devptr,
) -> i32 {
    // SAFETY: the test passes a Body it owns for the create call.
    let b = unsafe { &mut *user.cast::<Body>() };
    b.calls += 1;
    // SAFETY: the test body; the buffers hold the capacity's rows and 4 meta words; the
    // stream is the capturing one.
    match unsafe {
        srb::testing::launch_sized_body(
            &b.kernel,
            stream.cast(),
            count,
            n_max,
            class_index,
            b.out,
            b.meta,
        )
    } {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

/// A callback that refuses its second class.
unsafe extern "C" fn refuse_second(
    _user: *mut c_void,
    _stream: *mut capi::CUstream_st,
    class_index: u32,
    _n_max: u64,
    _count: capi::srb_devptr,
) -> i32 {
    if class_index == 1 {
        7
    } else {
        0
    }
}

/// One bad create: what it shows, then the count's address and kind, the capacity, the
/// classes and their number, the body, whether `out` is given, and the code it must return.
type BadCreate = (
    &'static str,
    capi::srb_devptr,
    u32,
    u64,
    *const u64,
    u32,
    capi::srb_sized_body,
    bool,
    i32,
);

/// The argument checks that need no GPU.
pub(crate) fn capi_sized_launch_arguments() -> Result<()> {
    const COUNT: capi::srb_devptr = 0x1000;
    const I32: u32 = capi::SRB_COUNT_I32;
    let null = std::ptr::null::<u64>();
    let descending = [64u64, 32];
    let body = Some(refuse_second as unsafe extern "C" fn(_, _, _, _, _) -> _);
    let cases: [BadCreate; 8] = [
        (
            "a null body",
            COUNT,
            I32,
            64,
            null,
            0,
            None,
            true,
            capi::SRB_ERR_INVALID_ARGUMENT,
        ),
        (
            "a null out",
            COUNT,
            I32,
            64,
            null,
            0,
            body,
            false,
            capi::SRB_ERR_INVALID_ARGUMENT,
        ),
        (
            "an unknown count kind",
            COUNT,
            77,
            64,
            null,
            0,
            body,
            true,
            capi::SRB_ERR_INVALID_ARGUMENT,
        ),
        (
            "capacity 0",
            COUNT,
            I32,
            0,
            null,
            0,
            body,
            true,
            capi::SRB_ERR_INVALID_CONFIG,
        ),
        (
            "descending classes",
            COUNT,
            I32,
            64,
            descending.as_ptr(),
            2,
            body,
            true,
            capi::SRB_ERR_INVALID_CONFIG,
        ),
        (
            "null classes",
            COUNT,
            I32,
            64,
            null,
            2,
            body,
            true,
            capi::SRB_ERR_INVALID_ARGUMENT,
        ),
        (
            "a null count",
            0,
            I32,
            64,
            null,
            0,
            body,
            true,
            capi::SRB_ERR_BAD_POINTER,
        ),
        (
            "a misaligned count",
            0x1002,
            I32,
            64,
            null,
            0,
            body,
            true,
            capi::SRB_ERR_BAD_POINTER,
        ),
    ];
    for (what, count, kind, capacity, classes, num, body, give_out, want) in cases {
        let mut out: *mut capi::srb_sized_launch = std::ptr::null_mut();
        let out_arg = if give_out {
            &mut out as *mut _
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: every pointer is null or valid for the call (`classes` holds `num` values
        // where not null).
        let code = unsafe {
            capi::srb_sized_launch_create(
                0,
                count,
                kind,
                capacity,
                classes,
                num,
                body,
                std::ptr::null_mut(),
                out_arg,
            )
        };
        ensure!(code == want, "{what}: {code} {}", last_error());
        ensure!(out.is_null(), "{what}: a failed create stored a handle");
    }
    // SAFETY: null handles, which every call refuses or ignores.
    unsafe {
        ensure!(capi::srb_sized_launch_classes(std::ptr::null(), std::ptr::null_mut(), 0) == 0);
        capi::srb_sized_launch_destroy(std::ptr::null_mut());
        let code = capi::srb_sized_launch_wait(
            std::ptr::null(),
            1,
            -1,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        ensure!(
            code == capi::SRB_ERR_INVALID_ARGUMENT,
            "wait on null: {code}"
        );
    }
    Ok(())
}

pub(crate) fn capi_sized_launch() -> Result<()> {
    let capacity = 5000usize;
    let mut rig = Rig::new(capacity)?;
    let count_ptr = rig.count_ptr();
    let classes = [100u64, 1000, 5000];
    let mut l: *mut capi::srb_sized_launch = std::ptr::null_mut();
    // SAFETY: valid pointers; body outlives the call.
    let code = unsafe {
        capi::srb_sized_launch_create(
            0,
            count_ptr,
            capi::SRB_COUNT_I32,
            capacity as u64,
            classes.as_ptr(),
            3,
            Some(record_body),
            rig.user(),
            &mut l,
        )
    };
    if unavailable(code)? {
        return Ok(());
    }
    ensure!(code == capi::SRB_OK, "create: {code} {}", last_error());
    ensure!(
        rig.body.calls == 3,
        "the callback ran {} times",
        rig.body.calls
    );
    let result = (|| -> Result<()> {
        let mut got = [0u64; 4];
        // SAFETY: a live handle; room for 4.
        ensure!(unsafe { capi::srb_sized_launch_classes(l, got.as_mut_ptr(), 4) } == 3);
        ensure!(got[..3] == classes);
        let counts = [0i32, 100, 101, 999, 1000, 1001, 5000, 5001, -2];
        let seqs = rig.enqueue_counts(l, &counts)?;
        for (&seq, &n) in seqs.iter().zip(&counts) {
            let (mut c, mut k) = (0u64, u32::MAX);
            // SAFETY: a live handle; out-pointers.
            let code = unsafe { capi::srb_sized_launch_wait(l, seq, -1, &mut c, &mut k) };
            match n {
                5001 => ensure!(
                    code == capi::SRB_ERR_COUNT_EXCEEDS_CAPACITY && c == 5001,
                    "{n}: {code} {c}"
                ),
                -2 => ensure!(
                    code == capi::SRB_ERR_NEGATIVE_COUNT && c as i64 == -2,
                    "{n}: {code} {c}"
                ),
                _ => {
                    let want = classes.iter().position(|&m| n as u64 <= m).unwrap() as u32;
                    ensure!(
                        code == capi::SRB_OK && c == n as u64 && k == want,
                        "{n}: {code} {c} class {k}"
                    );
                }
            }
            // SAFETY: as above.
            let again = unsafe { capi::srb_sized_launch_wait(l, seq, -1, &mut c, &mut k) };
            ensure!(
                again == capi::SRB_ERR_INVALID_ARGUMENT,
                "a second wait of {seq}: {again}"
            );
        }
        let m = rig.stream.clone_dtoh(&rig.meta)?;
        ensure!(m[3] == 7, "{} bodies ran for 7 counts in range", m[3]);
        rig.stream.memset_zeros(&mut rig.meta)?;
        Ok(())
    })();
    // SAFETY: created above, destroyed once.
    unsafe { capi::srb_sized_launch_destroy(l) };
    result?;
    // A callback that fails: the class is named, nothing is made.
    let mut none: *mut capi::srb_sized_launch = std::ptr::null_mut();
    // SAFETY: valid pointers.
    let code = unsafe {
        capi::srb_sized_launch_create(
            0,
            count_ptr,
            capi::SRB_COUNT_I32,
            capacity as u64,
            classes.as_ptr(),
            3,
            Some(refuse_second),
            std::ptr::null_mut(),
            &mut none,
        )
    };
    ensure!(
        code == capi::SRB_ERR_BODY_RECORDING,
        "a refusing callback: {code}"
    );
    ensure!(
        last_error().contains("class 1") && last_error().contains("returned 7"),
        "{}",
        last_error()
    );
    ensure!(none.is_null());
    Ok(())
}
