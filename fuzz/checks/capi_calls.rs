//! Every C entry point that takes a readback handle, with a null handle and arguments from
//! fuzz bytes: sequence numbers, columns, buckets, count kinds, timeouts, launch statuses,
//! device addresses (plain numbers: never dereferenced on the host), column and length arrays
//! (null, or host arrays of fuzzed length), streams and events (null, or a dangling
//! non-null value the library must not touch once the handle is refused), and out-pointers
//! (null, or one value between two canaries). A sequence of up to 64 calls per input.
//!
//! Asserted: no panic; `SRB_ERR_INVALID_ARGUMENT` from every call that returns a code, null
//! from the pointer accessors, 0 or `SRB_COPY_NONE` from the handle queries, nothing written
//! to any out-pointer nor its canaries, and `srb_last_error` naming the null (same buffer,
//! NUL-terminated, UTF-8).
//!
//! Needs a GPU (left to capi/tests/capi.rs and the GPU suites): a live handle, which only a
//! device gives, and so the checks behind it (the column arrays' reading, count kinds, held
//! sequence numbers, column and bucket indices, timeouts, stream and pointer checks).
use super::input::Input;
use super::last_error::LastError;
use sized_readback_capi as capi;
use std::ptr::{null, null_mut, NonNull};

const CANARY: u64 = 0xa5a5_a5a5_a5a5_a5a5;

/// One out-value between two canaries; `ptr` is null when the input asks for null.
struct Out {
    cells: [u64; 3],
    null: bool,
}

impl Out {
    fn new(r: &mut Input) -> Self {
        Out {
            cells: [CANARY, CANARY ^ 1, CANARY],
            null: r.byte().is_multiple_of(4),
        }
    }
    fn ptr(&mut self) -> *mut u64 {
        if self.null {
            null_mut()
        } else {
            &mut self.cells[1]
        }
    }
    fn untouched(&self) -> bool {
        self.cells == [CANARY, CANARY ^ 1, CANARY]
    }
}

/// A host array of fuzzed length (0 to 2 * SRB_MAX_COLUMNS), or null.
fn array<T>(r: &mut Input, value: impl Fn(&mut Input) -> T) -> Option<Vec<T>> {
    if r.byte().is_multiple_of(4) {
        return None;
    }
    let n = r.byte() as usize % (2 * capi::SRB_MAX_COLUMNS as usize + 1);
    Some((0..n).map(|_| value(r)).collect())
}

fn ptr_of<T>(a: &Option<Vec<T>>) -> *const T {
    a.as_ref().map_or(null(), |v| v.as_ptr())
}

/// A stream or event: null, or a dangling non-null value.
fn opaque<T>(r: &mut Input) -> *mut T {
    if r.bool() {
        null_mut()
    } else {
        NonNull::dangling().as_ptr()
    }
}

/// Runs up to 64 calls from `data` on a null handle and checks each answer.
pub fn check(data: &[u8]) {
    let last = LastError::new();
    let mut r = Input::new(data);
    let rb: *mut capi::srb_readback = null_mut();
    for _ in 0..64 {
        if r.is_empty() {
            break;
        }
        let op = r.byte() % 22;
        let seq = r.u64();
        let (a, b) = (r.u32(), r.u32());
        let mut out1 = Out::new(&mut r);
        let mut out2 = Out::new(&mut r);
        let mut code = capi::SRB_ERR_INVALID_ARGUMENT;
        // SAFETY: a null handle, which every call refuses before reading anything else; the
        // arrays and out-pointers are null or valid host memory of the lengths given.
        unsafe {
            match op {
                0..=2 => {
                    let cols = array(&mut r, |r| r.u64());
                    let lens = array(&mut r, |r| r.usize());
                    let stream = opaque(&mut r);
                    let after = opaque(&mut r);
                    let (count, offsets) = (r.u64(), r.u64());
                    code = match op {
                        0 => capi::srb_enqueue(
                            rb,
                            stream,
                            after,
                            ptr_of(&cols),
                            ptr_of(&lens),
                            count,
                            a,
                            out1.ptr(),
                        ),
                        1 => capi::srb_enqueue_buckets(
                            rb,
                            stream,
                            after,
                            ptr_of(&cols),
                            ptr_of(&lens),
                            count,
                            offsets,
                            a,
                            out1.ptr(),
                        ),
                        _ => capi::srb_record(
                            rb,
                            stream,
                            after,
                            ptr_of(&cols),
                            ptr_of(&lens),
                            count,
                            a,
                        ),
                    };
                }
                3 => {
                    // The descriptor's bytes between two canary descriptors.
                    let mut descs: [capi::srb_append_desc; 3] = std::mem::zeroed();
                    let bytes = std::mem::size_of_val(&descs);
                    std::ptr::write_bytes(descs.as_mut_ptr().cast::<u8>(), 0xa5, bytes);
                    let desc = if r.bool() {
                        null_mut()
                    } else {
                        &mut descs[1] as *mut _
                    };
                    code = capi::srb_append_begin(
                        rb,
                        opaque(&mut r),
                        opaque(&mut r),
                        desc,
                        out1.ptr(),
                    );
                    let raw = std::slice::from_raw_parts(descs.as_ptr().cast::<u8>(), bytes);
                    assert!(raw.iter().all(|&b| b == 0xa5), "append_begin wrote");
                }
                4 => code = capi::srb_append_end(rb, seq, r.i32()),
                5 => {
                    let mut desc: capi::srb_append_desc = std::mem::zeroed();
                    let p = if r.bool() {
                        null_mut()
                    } else {
                        &mut desc as *mut _
                    };
                    code = capi::srb_append_desc_graph(rb, p);
                }
                6 => code = capi::srb_poll(rb, seq),
                7 => code = capi::srb_wait(rb, seq, r.i64(), out1.ptr()),
                8 => code = capi::srb_next(rb, r.i64(), out1.ptr(), out2.ptr()),
                9 => code = capi::srb_count(rb, seq, out1.ptr()),
                10 => assert!(capi::srb_data(rb, seq, a).is_null()),
                11 => assert!(capi::srb_bucket_data(rb, seq, a, b, out1.ptr()).is_null()),
                12 => code = capi::srb_release(rb, seq),
                13 => code = capi::srb_fetch_spill(rb, seq, opaque(&mut r), r.i64(), out1.ptr()),
                14 => assert!(capi::srb_spill_data(rb, seq, a).is_null()),
                15 => assert!(capi::srb_spill_bucket_data(rb, seq, a, b, out1.ptr()).is_null()),
                16 => assert_eq!(capi::srb_capacity(rb), 0),
                17 => assert_eq!(capi::srb_buckets(rb), 0),
                18 => assert_eq!(capi::srb_staged_copy(rb), capi::SRB_COPY_NONE),
                19 => capi::srb_destroy(rb),
                _ => {
                    // A message read back is NUL-terminated and stays put between calls.
                    let _ = last.text();
                }
            }
        }
        assert_eq!(code, capi::SRB_ERR_INVALID_ARGUMENT, "op {op}");
        assert!(
            out1.untouched() && out2.untouched(),
            "op {op} wrote an out-value"
        );
        if op <= 15 {
            let text = last.text();
            assert!(text.contains("null"), "op {op}: {text}");
        }
        last.check_stable();
    }
}
