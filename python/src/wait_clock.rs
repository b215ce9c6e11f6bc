//! A Python wait's clock: the waits release the GIL in slices so that signals (Ctrl-C) are
//! seen, and report a timeout for the whole wait, from the call, never for its last slice.
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::time::{Duration, Instant};

/// Longest stretch a wait spends without the GIL before it checks for signals (Ctrl-C).
pub(crate) const WAIT_SLICE: Duration = Duration::from_millis(100);

/// When a Python wait began and when it gives up (`None`: no limit).
#[derive(Debug, Clone, Copy)]
pub(crate) struct WaitClock {
    began: Instant,
    deadline: Option<Instant>,
}

impl WaitClock {
    /// `timeout` seconds from now; `None`, infinity or a timeout past the clock: no limit.
    pub(crate) fn start(timeout: Option<f64>) -> PyResult<Self> {
        let began = Instant::now();
        let deadline = match timeout {
            None => None,
            // A number of seconds too large for a `Duration` (infinity, 1e20) is no limit, as one
            // past the clock is: `from_secs_f64` would panic on it. NaN fails `>=`.
            Some(t) if t >= 0.0 => Duration::try_from_secs_f64(t)
                .ok()
                .and_then(|d| began.checked_add(d)),
            Some(t) => {
                return Err(PyValueError::new_err(format!(
                    "timeout must be a non-negative number of seconds, not {t}"
                )))
            }
        };
        Ok(Self { began, deadline })
    }

    /// How long the wait may last (`None`: no limit).
    pub(crate) fn limit(&self) -> Option<Duration> {
        self.deadline.map(|d| d - self.began)
    }

    /// The next slice to wait without the GIL: at most [`WAIT_SLICE`], never past the deadline.
    pub(crate) fn slice(&self) -> Duration {
        match self.deadline {
            Some(d) => d.saturating_duration_since(Instant::now()).min(WAIT_SLICE),
            None => WAIT_SLICE,
        }
    }

    /// After a slice ran out: `ReadbackTimeoutError` for the whole wait once the deadline has
    /// passed, else a chance for signals before the next slice.
    pub(crate) fn slice_ran_out(&self, py: Python<'_>) -> PyResult<()> {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(crate::errors::to_py(
                py,
                srb::Error::Timeout {
                    waited: self.began.elapsed(),
                },
            ));
        }
        py.check_signals()
    }
}
