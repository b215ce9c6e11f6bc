//! The one wait loop: poll a cheap condition in bursts, run a costly check at most once per
//! period, give up at a deadline, and pause between rounds as the caller asks. Every wait of
//! the engines (a trailer, an event, a replay, the consumer lock) is one [`Backoff`].
use crate::error::{Error, Result};
use std::time::{Duration, Instant};

/// How often a wait that spins on host memory queries the device: a query (`cuEventQuery`)
/// costs about 1.5 µs (H200, driver 580), and what lands meanwhile is seen only after it;
/// device errors and kernels that never write their trailer are still reported within this.
pub(crate) const QUERY_PERIOD: Duration = Duration::from_micros(50);

/// What a round that found nothing ends with.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Pause {
    /// Nothing: the next round follows at once.
    None,
    /// Yield the thread.
    Yield,
    /// Yield for the first `yields` rounds, then sleep `sleep` each round.
    YieldThenSleep { yields: u32, sleep: Duration },
}

/// When a wait gives up: the instant its caller began waiting and the instant it ends, so that
/// [`Error::Timeout`] reports the whole wait (the caller's lock and setup included), never less
/// than the timeout asked for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    began: Instant,
    at: Instant,
}

impl Deadline {
    /// `timeout` from now; `None` (no limit) where it does not fit the clock.
    pub(crate) fn after(timeout: Duration) -> Option<Self> {
        let began = Instant::now();
        began.checked_add(timeout).map(|at| Self { began, at })
    }

    /// The timeout error: the time since the caller began waiting.
    pub(crate) fn timeout(&self) -> Error {
        Error::Timeout {
            waited: self.began.elapsed(),
        }
    }
}

/// How one wait polls.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    /// Cheap polls per round, each followed by a spin-loop hint.
    pub(crate) spins: u32,
    /// The costly check runs in the first round, then at most once per `period` (never again
    /// if the period does not fit the clock, e.g. `Duration::MAX`).
    pub(crate) period: Duration,
    pub(crate) pause: Pause,
}

impl Backoff {
    /// Runs rounds until `cheap` or `costly` returns a value or an error, or until a round
    /// ends at or after `deadline` ([`Error::Timeout`], with the time since the deadline's
    /// wait began).
    pub(crate) fn run<T>(
        &self,
        deadline: Option<Deadline>,
        mut cheap: impl FnMut() -> Result<Option<T>>,
        mut costly: impl FnMut() -> Result<Option<T>>,
    ) -> Result<T> {
        let mut next_check = Some(Instant::now());
        let mut rounds = 0u32;
        loop {
            for _ in 0..self.spins {
                if let Some(v) = cheap()? {
                    return Ok(v);
                }
                std::hint::spin_loop();
            }
            let now = Instant::now();
            if next_check.is_some_and(|t| now >= t) {
                if let Some(v) = costly()? {
                    return Ok(v);
                }
                next_check = now.checked_add(self.period);
            }
            if let Some(d) = deadline.filter(|d| now >= d.at) {
                return Err(d.timeout());
            }
            match self.pause {
                Pause::None => {}
                Pause::Yield => std::thread::yield_now(),
                Pause::YieldThenSleep { yields, .. } if rounds < yields => std::thread::yield_now(),
                Pause::YieldThenSleep { sleep, .. } => std::thread::sleep(sleep),
            }
            rounds = rounds.saturating_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPIN: Backoff = Backoff {
        spins: 4,
        period: Duration::ZERO,
        pause: Pause::None,
    };

    #[test]
    fn returns_what_the_cheap_poll_finds() {
        let mut polls = 0;
        let got = SPIN.run(
            None,
            || {
                polls += 1;
                Ok((polls == 6).then_some(polls))
            },
            || Ok(None),
        );
        assert_eq!(got.unwrap(), 6);
    }

    #[test]
    fn the_costly_check_runs_in_the_first_round_and_may_end_the_wait() {
        let mut checks = 0;
        let got: Result<()> = SPIN.run(
            None,
            || Ok(None),
            || {
                checks += 1;
                Err(Error::NothingRecorded)
            },
        );
        assert!(matches!(got, Err(Error::NothingRecorded)));
        assert_eq!(checks, 1);
    }

    #[test]
    fn a_period_past_the_clock_checks_once() {
        let mut checks = 0;
        let mut polls = 0;
        let once = Backoff {
            spins: 1,
            period: Duration::MAX,
            pause: Pause::None,
        };
        let got = once.run(
            None,
            || {
                polls += 1;
                Ok((polls == 100).then_some(()))
            },
            || {
                checks += 1;
                Ok(None::<()>)
            },
        );
        assert!(got.is_ok());
        assert_eq!(checks, 1);
    }

    #[test]
    fn gives_up_at_the_deadline() {
        let slow = Backoff {
            spins: 1,
            period: QUERY_PERIOD,
            pause: Pause::YieldThenSleep {
                yields: 2,
                sleep: Duration::from_micros(20),
            },
        };
        let got: Result<()> = slow.run(Deadline::after(Duration::ZERO), || Ok(None), || Ok(None));
        assert!(matches!(got, Err(Error::Timeout { .. })));
    }

    #[test]
    fn a_timeout_reports_the_whole_wait_from_its_deadline() {
        let timeout = Duration::from_millis(3);
        let deadline = Deadline::after(timeout);
        // The caller's own work before the loop (a lock, a launch) counts toward the wait.
        std::thread::sleep(Duration::from_millis(2));
        let got: Result<()> = SPIN.run(deadline, || Ok(None), || Ok(None));
        match got {
            Err(Error::Timeout { waited }) => assert!(waited >= timeout, "waited {waited:?}"),
            other => panic!("expected a timeout, got {other:?}"),
        }
    }

    #[test]
    fn a_timeout_past_the_clock_means_no_deadline() {
        assert!(Deadline::after(Duration::MAX).is_none());
    }
}
