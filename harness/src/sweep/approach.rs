//! The approaches of the latency sweep: what each one is, whether it reads back and copies to
//! the host, and the count it reads at each cycle.
use super::count_of;
use serde::Serialize;

/// Every approach of the latency sweep, in table order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Approach {
    /// The producer kernel and an event: the floor of any readback (not a readback).
    ProducerOnly,
    /// Two back-to-back async copies; the second sized by the stale host count (the seed's bug).
    Naive,
    /// Copy the count, cuStreamSynchronize, copy n (the seed's "Solution 1").
    Sync,
    /// A host function wakes a worker thread that issues the sized copy and records an event.
    CallbackWorker,
    /// Always copy the whole capacity.
    OverCopy,
    /// The host already knows n: one copy (the floor, not a real option), into a destination
    /// of its own, checked in full like every approach.
    Oracle,
    /// The oracle as the criterion bench (`benches/readback.rs`) measures it, in the same run:
    /// its producer (`srb_produce_f64`), the point's n every time, a cudarc event, a
    /// destination of its own that the host reads one element of, and back-to-back
    /// iterations timed as one batch ([`CRITERION_BATCH`]) whose mean is one sample.
    OracleCriterionWay,
    /// The oracle's copy into a destination whose first n elements the host read just before
    /// the cycle (untimed): what `oracle` measured while it shared one destination with the
    /// other copy-based approaches and ran right after over_copy, whose check had just read it.
    OracleAfterHostRead,
    /// This crate: mapped slot, cuEventSynchronize.
    MappedEvent,
    /// This crate: mapped slot, spin on the trailer's sequence number (the default).
    MappedTrailer,
    /// This crate: device slot + one fixed-size copy of the whole slot, event
    /// (`StagedCopy::Whole`).
    Staged,
    /// This crate: device slot, then a copy whose size the pack picks on the device (a CUDA
    /// graph's SWITCH node, `StagedCopy::Sized`), event.
    StagedSized,
    /// The floor of [`Approach::StagedSized`] (not a readback of the crate's API): the
    /// library's own sized-copy graph and kernel launched alone
    /// ([`sized_readback::testing::BareSizedCopy`]: the pack kernel node, then the SWITCH
    /// node whose body copies the count's size class of rows and the trailer), its
    /// [`SLOTS`] slots taken in turn as the readback's ring takes them, no ring bookkeeping,
    /// ticket, checks or trailer wait; an event, synchronized, then the count decoded
    /// from the trailer and the rows checked as every approach's. What the sized readback
    /// costs over it is what the readback engine adds; its own distance to the oracle is what
    /// the graph mechanism costs.
    StagedSizedBare,
    /// This crate, mapped + trailer, but the producer does not signal programmatic launch
    /// completion early (griddepcontrol.launch_dependents): what PDL gives without help.
    MappedTrailerPlain,
    /// This crate, mapped + trailer, launched without programmatic dependent launch: what
    /// PDL gives (A/B in the same run).
    MappedTrailerNoPdl,
    /// This crate's device-side append: the kernel writes its rows and count into the mapped
    /// slot itself (the seed loop; the realistic sweep has its own list, `select::Sel`).
    Append,
}

impl Approach {
    /// All of them.
    pub const ALL: [Approach; 15] = [
        Approach::ProducerOnly,
        Approach::Naive,
        Approach::Sync,
        Approach::CallbackWorker,
        Approach::OverCopy,
        Approach::Oracle,
        Approach::OracleCriterionWay,
        Approach::OracleAfterHostRead,
        Approach::MappedEvent,
        Approach::MappedTrailer,
        Approach::Staged,
        Approach::StagedSized,
        Approach::StagedSizedBare,
        Approach::MappedTrailerPlain,
        Approach::MappedTrailerNoPdl,
    ];
    /// Short name (JSON key, table column).
    pub fn name(self) -> &'static str {
        match self {
            Approach::ProducerOnly => "producer_only",
            Approach::Naive => "naive",
            Approach::Sync => "sync",
            Approach::CallbackWorker => "callback_worker",
            Approach::OverCopy => "over_copy",
            Approach::Oracle => "oracle",
            Approach::OracleCriterionWay => "oracle_criterion_way",
            Approach::OracleAfterHostRead => "oracle_after_host_read",
            Approach::MappedEvent => "crate_mapped_event",
            Approach::MappedTrailer => "crate_mapped_trailer",
            Approach::Staged => "crate_staged",
            Approach::StagedSized => "crate_staged_sized",
            Approach::StagedSizedBare => "bare_sized_graph",
            Approach::MappedTrailerPlain => "crate_trailer_no_trigger",
            Approach::MappedTrailerNoPdl => "crate_trailer_no_pdl",
            Approach::Append => "crate_append",
        }
    }
    /// Whether it reads anything back (the producer-only floor does not).
    pub fn reads_back(self) -> bool {
        self != Approach::ProducerOnly
    }
    /// Whether the harness issues its copies into pinned host memory (each such approach has
    /// a destination of its own, as each of the crate's readbacks has its own slots).
    pub fn copies_to_host(self) -> bool {
        matches!(
            self,
            Approach::Naive
                | Approach::Sync
                | Approach::CallbackWorker
                | Approach::OverCopy
                | Approach::Oracle
                | Approach::OracleCriterionWay
                | Approach::OracleAfterHostRead
        )
    }
    /// The count of cycle `k` at sweep point `n`: [`count_of`], except for the criterion-way
    /// oracle, which copies the point's n every time, as the bench does.
    pub fn count_at(self, n: usize, k: u64) -> usize {
        if self == Approach::OracleCriterionWay {
            n
        } else {
            count_of(n, k)
        }
    }
}

/// The names of the approaches, in table order.
pub fn names() -> Vec<&'static str> {
    Approach::ALL.iter().map(|a| a.name()).collect()
}
