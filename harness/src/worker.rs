//! Callback designs: the seed's (a host function that itself issues the second copy, which
//! CUDA forbids) and the legal one (the host function only wakes a worker thread, which issues
//! the sized copy and records an event).
use crate::cuda;
use anyhow::{anyhow, Result};
use sized_readback::cudarc::driver::sys::{self, CUdeviceptr, CUevent, CUresult, CUstream};
use sized_readback::cudarc::driver::CudaContext;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// One sized copy the worker issues once its host function has run.
#[derive(Debug, Clone, Copy)]
pub struct Job {
    /// Pinned host address of the count (already copied when the host function runs).
    pub h_count: *const i32,
    /// Source on the device.
    pub d_data: CUdeviceptr,
    /// Pinned destination.
    pub h_data: *mut f64,
    /// Largest count the destination holds.
    pub cap: usize,
    /// Stream of the copy.
    pub stream: CUstream,
    /// Recorded after the copy.
    pub done: CUevent,
}

// SAFETY: addresses and handles only; the harness keeps them alive while the worker runs.
unsafe impl Send for Job {}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    fired: u64,
    recorded: u64,
    error: Option<String>,
    stop: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    recorded: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The host function: counts itself and wakes the worker. No CUDA call.
///
/// # Safety
/// `data` points to the live `Shared` of a [`Worker`] (`Arc::as_ptr`), which stays alive
/// until this call returns (the worker's drop waits for every submitted job).
unsafe extern "C" fn wake_worker(data: *mut c_void) {
    // SAFETY: data is the Arc<Shared> the Worker keeps alive until every fired job is done.
    let shared = unsafe { &*(data as *const Shared) };
    shared.lock().fired += 1;
    shared.wake.notify_one();
}

/// A worker thread fed by host functions.
pub struct Worker {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    submitted: u64,
}

impl Worker {
    /// Starts the thread; it binds `ctx` and waits for jobs.
    pub fn start(ctx: Arc<CudaContext>) -> Worker {
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let thread = std::thread::spawn(move || {
            if let Err(e) = ctx.bind_to_thread() {
                s.lock().error = Some(format!("cuCtxSetCurrent: {e}"));
                return;
            }
            let mut done = 0u64;
            loop {
                let job = {
                    let mut st = s.lock();
                    while st.fired == done && !st.stop {
                        st = s.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                    }
                    if st.fired == done {
                        return;
                    }
                    st.queue.pop_front()
                };
                done += 1;
                let result = match job {
                    Some(j) => run_job(j),
                    None => Err(anyhow!("host function fired without a job")),
                };
                let mut st = s.lock();
                if let Err(e) = result {
                    st.error.get_or_insert(format!("{e:#}"));
                }
                st.recorded += 1;
                s.recorded.notify_all();
            }
        });
        Worker {
            shared,
            thread: Some(thread),
            submitted: 0,
        }
    }

    /// Queues `job` and enqueues the host function that will start it, on `stream` (after
    /// the count copy the caller enqueued there).
    pub fn submit(&mut self, stream: CUstream, job: Job) -> Result<()> {
        self.shared.lock().queue.push_back(job);
        // SAFETY: wake_worker makes no CUDA call; the Arc it points to lives in self, and Drop
        // waits for every submitted job.
        unsafe {
            cuda::host_func(
                stream,
                wake_worker,
                Arc::as_ptr(&self.shared) as *mut c_void,
            )?
        };
        self.submitted += 1;
        Ok(())
    }

    /// Blocks until the worker has enqueued every submitted copy and its event, then waits
    /// on `done` (the last job's event).
    pub fn wait(&self, done: CUevent) -> Result<()> {
        let mut st = self.shared.lock();
        while st.recorded < self.submitted {
            if let Some(e) = &st.error {
                return Err(anyhow!("worker: {e}"));
            }
            st = self
                .shared
                .recorded
                .wait(st)
                .unwrap_or_else(|p| p.into_inner());
        }
        if let Some(e) = &st.error {
            return Err(anyhow!("worker: {e}"));
        }
        drop(st);
        cuda::event_sync(done)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run_job(j: Job) -> Result<()> {
    // SAFETY: the count copy completed before the host function ran (stream order).
    let n = unsafe { std::ptr::read_volatile(j.h_count) }.clamp(0, j.cap as i32) as usize;
    // SAFETY: h_data holds cap doubles, d_data at least that many; both outlive the job.
    unsafe { cuda::dtoh(j.h_data.cast(), j.d_data, n * 8, j.stream)? };
    cuda::record(j.done, j.stream)
}

/// What the seed's callback saw.
#[derive(Debug, Default)]
pub struct SeedCallbackArgs {
    /// The host count (copied before the callback runs).
    pub h_count: usize,
    /// Destination of the second copy.
    pub h_data: usize,
    /// Source of the second copy.
    pub d_data: CUdeviceptr,
    /// The stream the callback tries to enqueue on.
    pub stream: usize,
    /// Largest count.
    pub cap: usize,
    /// Whether the callback ran.
    pub ran: AtomicBool,
    /// The CUresult of its cuMemcpyDtoHAsync.
    pub result: Mutex<Option<CUresult>>,
}

/// The seed's callback: issues the second copy from inside the stream callback.
///
/// # Safety
/// `data` points to a live [`SeedCallbackArgs`] that outlives this call; `h_count` addresses
/// a readable `i32` (the count copy, completed before the callback in stream order),
/// `h_data` at least `cap` writable doubles of pinned memory, `d_data` at least `cap`
/// doubles of device memory, and `stream` is a live stream handle.
pub unsafe extern "C" fn seed_callback(data: *mut c_void) {
    // SAFETY: the harness keeps the args alive until the stream has passed this function.
    let a = unsafe { &*(data as *const SeedCallbackArgs) };
    // SAFETY: the count copy completed before this function runs (stream order).
    let n = unsafe { std::ptr::read_volatile(a.h_count as *const i32) }.clamp(0, a.cap as i32);
    // SAFETY: what the seed does; the driver refuses CUDA calls from a host function.
    let r = unsafe {
        sys::cuMemcpyDtoHAsync_v2(
            a.h_data as *mut c_void,
            a.d_data,
            n as usize * 8,
            a.stream as CUstream,
        )
    };
    *a.result.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
    a.ran.store(true, Ordering::SeqCst);
}
