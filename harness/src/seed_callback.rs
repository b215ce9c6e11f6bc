//! The seed's own callback: a host function that itself calls cuMemcpyDtoHAsync, which CUDA
//! forbids. Run last, since the stream it runs on may never finish.
use crate::cuda;
use crate::data::SeedCallback;
use crate::sweep::Rig;
use crate::worker;
use anyhow::Result;
use std::ffi::c_void;
use std::time::{Duration, Instant};

/// The seed's callback, `cycles` times at count `n`: the error its copy gets and whether the
/// data ever arrived. Stops early, `hung` set, if the stream gets stuck.
pub fn measure(rig: &mut Rig, n: usize, cycles: usize) -> Result<SeedCallback> {
    use std::sync::atomic::Ordering;
    let s = rig.stream();
    let done = cuda::Event::new()?;
    let mut out = SeedCallback::default();
    let h_count = sized_readback::testing::PinnedBuffer::new(rig.ctx(), 64, false)?;
    for _ in 0..cycles {
        // SAFETY: h_data holds max_n >= n doubles; nothing else writes it now.
        unsafe { std::slice::from_raw_parts_mut(rig.h_data(), n) }.fill(-1.0);
        let args = Box::new(worker::SeedCallbackArgs {
            h_count: h_count.host_ptr() as usize,
            h_data: rig.h_data() as usize,
            d_data: rig.d_data(),
            stream: s as usize,
            cap: n,
            ..Default::default()
        });
        let cycle = rig.produce(n)?;
        // SAFETY: h_count is a pinned i32; the callback's args live until the stream is idle
        // (checked below before they drop, else leaked).
        unsafe {
            cuda::dtoh(h_count.host_ptr(), rig.d_count(), 4, s)?;
            cuda::host_func(s, worker::seed_callback, &*args as *const _ as *mut c_void)?;
        }
        cuda::record(done.0, s)?;
        let t0 = Instant::now();
        // SAFETY: live event.
        while !unsafe { cuda::event_query(done.0)? } {
            if t0.elapsed() > Duration::from_secs(5) {
                out.hung = true;
                std::mem::forget(args);
                return Ok(out);
            }
            std::thread::yield_now();
        }
        // Give a copy that was enqueued anyway every chance to land.
        rig.drain()?;
        std::thread::sleep(Duration::from_millis(2));
        out.cycles += 1;
        if args.ran.load(Ordering::SeqCst) {
            out.callback_ran += 1;
        }
        let r = *args.result.lock().unwrap_or_else(|p| p.into_inner());
        let name = r
            .map(cuda::error_name)
            .unwrap_or_else(|| "not called".into());
        if !out.copy_call_returned.contains(&name) {
            out.copy_call_returned.push(name);
        }
        // SAFETY: the stream is idle; h_data holds n doubles.
        let data = unsafe { std::slice::from_raw_parts(rig.h_data(), n) };
        // SAFETY: the count copy completed.
        let count = unsafe { std::ptr::read_volatile(h_count.host_ptr().cast::<i32>()) } as usize;
        if cuda::is_correct(count, data, n, cycle) {
            out.data_arrived += 1;
        }
    }
    Ok(out)
}
