//! What a readback's slots will be, decided before any driver call: the settings checked once
//! ([`SlotPlan::new`], the one place every setting is checked), the layout and bytes of the
//! slots, and the staged copy the settings ask for ([`CopyPlan`]), which the driver settles
//! when the slots are made ([`super::delivery::Delivery`]).
use super::sized_copy;
use crate::config::{ReadbackConfig, StagedCopy, Transport, WaitMode};
use crate::error::{Error, Result};
use crate::layout::{BucketTable, SlotLayout};

/// What fills the slots: a pack kernel (of one bucket or k), or the user's append kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Filler {
    Pack,
    Append,
}

/// Who picks each readback's slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sequencing {
    /// The host, from its ring (the host engine).
    Host,
    /// The pack on the device, from a counter (graph replay, the device engine): it runs
    /// without programmatic dependent launch and needs the mapped transport.
    Device,
}

/// The staged copy a readback's settings ask for, before the driver is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CopyPlan {
    /// Mapped: no copy.
    None,
    Whole,
    /// Sized if the driver allows it; `required`: else an error (else the whole slot).
    Sized {
        required: bool,
    },
}

impl CopyPlan {
    /// The staged copy in use (`None`: mapped) on a driver whose version `driver_version` gives
    /// (`cuDriverGetVersion`), asked only where the sized copy is planned: the sized copy where
    /// the driver has it, else the whole slot or, where it was required, an error.
    pub(crate) fn resolve(
        self,
        driver_version: impl FnOnce() -> Result<i32>,
    ) -> Result<Option<StagedCopy>> {
        Ok(match self {
            CopyPlan::None => None,
            CopyPlan::Whole => Some(StagedCopy::Whole),
            CopyPlan::Sized { required } => {
                let version = driver_version()?;
                if sized_copy::driver_supports(version) {
                    Some(StagedCopy::Sized)
                } else if !required {
                    Some(StagedCopy::Whole)
                } else {
                    return Err(Error::SizedCopyUnavailable {
                        reason: format!(
                            "the driver supports CUDA {}.{} and graph conditionals set from a \
                             kernel need CUDA 12.8 (cuDriverGetVersion {version} < 12080)",
                            version / 1000,
                            version % 1000 / 10
                        ),
                    });
                }
            }
        })
    }
}

/// A readback's slots as its settings ask for them, checked: made once per construction by
/// [`SlotPlan::new`], handed to the slots' allocation.
#[derive(Debug, Clone)]
pub(crate) struct SlotPlan {
    pub(crate) layout: SlotLayout,
    /// Bytes of every slot together.
    pub(crate) total: usize,
    pub(crate) copy: CopyPlan,
    pub(crate) sequencing: Sequencing,
    /// The settings, with [`Transport::Auto`] resolved (a single slot set is mapped).
    pub(crate) config: ReadbackConfig,
}

impl SlotPlan {
    /// Checks `cfg` for slots of `elem_sizes` sequenced and filled as given: the layout and
    /// the total size of the slots, and the settings that do not go together. Pure host
    /// logic.
    pub(crate) fn new(
        elem_sizes: &[usize],
        cfg: &ReadbackConfig,
        sequencing: Sequencing,
        table: BucketTable,
        filler: Filler,
    ) -> Result<Self> {
        let mut cfg = cfg.clone();
        // One slot set has one transport: under Auto it is the mapped one, fastest at every
        // count measured but a nearly full large slot (which only a readback with a second,
        // staged set can choose per enqueue: `crate::auto`).
        let asked_auto = cfg.transport == Transport::Auto;
        if asked_auto {
            cfg.transport = Transport::Mapped;
        }
        let cfg = cfg;
        let layout = SlotLayout::with_buckets(cfg.capacity, elem_sizes, cfg.buckets, table)?;
        let device_sequenced = sequencing == Sequencing::Device;
        let total = layout.total_bytes(cfg.slots)?;
        if device_sequenced && cfg.buckets > 1 {
            return Err(Error::config(
                "graph readbacks have one bucket: use a ticket-based bucketed readback",
            ));
        }
        // A host-sequenced pack copies at most the capacity and counts the rest, so it has no
        // spill region: a spill asked of one is a mistake to report, not a setting to drop.
        // (A graph readback's spill serves the append kernels recorded into it.)
        if let Some(rows @ 1..) = cfg.spill {
            if !device_sequenced && filler == Filler::Pack {
                return Err(Error::config(format!(
                    "a spill of {rows} rows on a pack readback: only append readbacks and graph \
                     readbacks have a spill region; a pack counts the rows past the capacity"
                )));
            }
        }
        if cfg.max_blocks == Some(0) {
            return Err(Error::config(
                "a maximum of 0 blocks per pack launch: a pack launch needs at least one block",
            ));
        }
        if cfg.slots > u32::MAX as usize {
            return Err(Error::config(format!(
                "at most {} slots, not {}",
                u32::MAX,
                cfg.slots
            )));
        }
        let mapped = cfg.transport == Transport::Mapped;
        if !mapped && cfg.wait == WaitMode::Trailer {
            return Err(Error::config(
                "trailer waiting needs the mapped transport: a staged slot arrives by DMA in no \
                 guaranteed byte order, so only its event says it is complete",
            ));
        }
        if device_sequenced && !mapped {
            return Err(Error::config(
                "graph replay needs the mapped transport: the slot is chosen on the device, so \
                 a staged copy's host-side parameters cannot follow it",
            ));
        }
        if device_sequenced && cfg.wait == WaitMode::Event {
            return Err(Error::config(
                "graph replay waits on the trailer: no per-slot event is recorded in a graph",
            ));
        }
        if device_sequenced && cfg.programmatic_launch == Some(true) {
            // One pack's counter store must be visible to the next pack's load, which only a
            // full kernel boundary guarantees.
            return Err(Error::config(
                "programmatic launch is not available for graph readbacks: consecutive packs \
                 must not overlap",
            ));
        }
        let copy = copy_plan(&layout, &cfg, sequencing, filler, asked_auto)?;
        Ok(SlotPlan {
            layout,
            total,
            copy,
            sequencing,
            config: cfg,
        })
    }
}

/// Which staged copy `cfg` asks for, given the readback's kind: the sized copy serves the
/// host-sequenced pack of one bucket (its kernel sets the size class); appends, bucket packs
/// and graph replay keep the whole-slot copy (or none, mapped). `asked_auto`: the settings
/// asked for [`Transport::Auto`], which a single slot set takes as mapped.
fn copy_plan(
    layout: &SlotLayout,
    cfg: &ReadbackConfig,
    sequencing: Sequencing,
    filler: Filler,
    asked_auto: bool,
) -> Result<CopyPlan> {
    let unavailable = |reason: &str| {
        if cfg.staged_copy == StagedCopy::Sized {
            Err(Error::SizedCopyUnavailable {
                reason: reason.into(),
            })
        } else {
            Ok(CopyPlan::Whole)
        }
    };
    match cfg.transport {
        Transport::Staged => {}
        Transport::Mapped | Transport::Auto => {
            return if cfg.staged_copy == StagedCopy::Sized {
                Err(Error::SizedCopyUnavailable {
                    reason: if asked_auto {
                        "this readback has one slot set, which the auto transport makes mapped, \
                         and the mapped transport copies nothing (ask for the staged transport)"
                    } else {
                        "the mapped transport copies nothing (ask for the staged transport)"
                    }
                    .into(),
                })
            } else {
                Ok(CopyPlan::None)
            };
        }
    }
    match cfg.staged_copy {
        StagedCopy::Whole => Ok(CopyPlan::Whole),
        _ if sequencing == Sequencing::Device => unavailable("graph readbacks"),
        _ if filler == Filler::Append => unavailable(
            "append readbacks copy the whole slot (the user's kernel cannot set the size class)",
        ),
        _ if layout.buckets() > 1 || layout.has_bucket_table() => {
            unavailable("bucketed readbacks copy the whole slot")
        }
        // The sized copy's pack runs in a graph, which starts after the stream's earlier work
        // as a whole and so cannot overlap the producer: where programmatic launch is asked
        // for, the whole-slot copy (whose pack is launched on its own) serves it.
        _ if cfg.programmatic_launch == Some(true) => unavailable(
            "it cannot launch the pack programmatically, as asked (the pack runs in a CUDA \
             graph, which starts only after the stream's earlier work)",
        ),
        StagedCopy::Auto => Ok(CopyPlan::Sized { required: false }),
        StagedCopy::Sized => Ok(CopyPlan::Sized { required: true }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(cfg: &ReadbackConfig, filler: Filler, table: BucketTable) -> Result<CopyPlan> {
        Ok(SlotPlan::new(&[8, 4], cfg, Sequencing::Host, table, filler)?.copy)
    }

    #[test]
    fn the_sized_copy_serves_staged_packs_of_one_bucket() {
        let staged = ReadbackConfig::new(1000).transport(Transport::Staged);
        let (pack, append) = (Filler::Pack, Filler::Append);
        let one = BucketTable::IfBucketed;
        assert_eq!(
            plan(&staged, pack, one).unwrap(),
            CopyPlan::Sized { required: false }
        );
        let sized = staged.clone().staged_copy(StagedCopy::Sized);
        assert_eq!(
            plan(&sized, pack, one).unwrap(),
            CopyPlan::Sized { required: true }
        );
        let whole = staged.clone().staged_copy(StagedCopy::Whole);
        assert_eq!(plan(&whole, pack, one).unwrap(), CopyPlan::Whole);
        // Appends and buckets copy the whole slot under Auto, and refuse an explicit Sized.
        assert_eq!(plan(&staged, append, one).unwrap(), CopyPlan::Whole);
        let bucketed = staged.clone().buckets(4);
        assert_eq!(plan(&bucketed, pack, one).unwrap(), CopyPlan::Whole);
        assert_eq!(
            plan(&staged, pack, BucketTable::Always).unwrap(),
            CopyPlan::Whole
        );
        for (cfg, filler) in [(sized.clone(), append), (sized.clone().buckets(4), pack)] {
            let e = plan(&cfg, filler, one).unwrap_err();
            assert!(matches!(e, Error::SizedCopyUnavailable { .. }), "{e:?}");
        }
        // Programmatic launch asked for: Auto takes the whole slot, which honours it; an
        // explicit Sized is refused. Asked off, or left to the device, it does not matter.
        let pdl = staged.clone().programmatic_launch(true);
        assert_eq!(plan(&pdl, pack, one).unwrap(), CopyPlan::Whole);
        match plan(&sized.clone().programmatic_launch(true), pack, one) {
            Err(Error::SizedCopyUnavailable { reason }) => {
                assert!(reason.contains("programmatically"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            plan(&staged.clone().programmatic_launch(false), pack, one).unwrap(),
            CopyPlan::Sized { required: false }
        );
        assert_eq!(
            plan(&sized.clone().programmatic_launch(false), pack, one).unwrap(),
            CopyPlan::Sized { required: true }
        );
        // Mapped copies nothing; an explicit Sized there is an error that says so.
        let mapped = ReadbackConfig::new(1000);
        assert_eq!(plan(&mapped, pack, one).unwrap(), CopyPlan::None);
        let e = plan(&mapped.staged_copy(StagedCopy::Sized), pack, one).unwrap_err();
        assert!(
            e.to_string()
                .contains("the mapped transport copies nothing"),
            "{e}"
        );
    }

    #[test]
    fn one_slot_set_under_auto_is_mapped() {
        let auto = ReadbackConfig::new(1000).transport(Transport::Auto);
        for (seq, filler, table) in [
            (Sequencing::Host, Filler::Pack, BucketTable::IfBucketed),
            (Sequencing::Host, Filler::Pack, BucketTable::Always),
            (Sequencing::Host, Filler::Append, BucketTable::IfBucketed),
            (Sequencing::Device, Filler::Pack, BucketTable::IfBucketed),
        ] {
            let p = SlotPlan::new(&[8], &auto, seq, table, filler).unwrap();
            assert_eq!(p.config.transport, Transport::Mapped);
            assert_eq!(p.copy, CopyPlan::None);
        }
        // Trailer waiting is the mapped transport's, so Auto takes it.
        let trailer = auto.clone().wait(WaitMode::Trailer);
        SlotPlan::new(
            &[8],
            &trailer,
            Sequencing::Host,
            BucketTable::IfBucketed,
            Filler::Pack,
        )
        .unwrap();
        // A sized copy asked of one slot set under Auto: refused, naming the auto transport.
        let sized = auto.staged_copy(StagedCopy::Sized);
        let one = BucketTable::IfBucketed;
        match SlotPlan::new(&[8], &sized, Sequencing::Host, one, Filler::Append) {
            Err(Error::SizedCopyUnavailable { reason }) => {
                assert!(reason.contains("auto transport makes mapped"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_driver_decides_the_copy() {
        let cuda_12_6 = || -> Result<i32> { Ok(12060) };
        let cuda_12_8 = || -> Result<i32> { Ok(12080) };
        // Auto on an older driver: the whole slot.
        let auto = CopyPlan::Sized { required: false };
        assert_eq!(auto.resolve(cuda_12_6).unwrap(), Some(StagedCopy::Whole));
        assert_eq!(auto.resolve(cuda_12_8).unwrap(), Some(StagedCopy::Sized));
        // An explicit Sized on an older driver says which CUDA it has.
        let sized = CopyPlan::Sized { required: true };
        match sized.resolve(cuda_12_6) {
            Err(Error::SizedCopyUnavailable { reason }) => {
                assert!(
                    reason.contains("CUDA 12.6") && reason.contains("12060"),
                    "{reason}"
                )
            }
            other => panic!("{other:?}"),
        }
        // Without a sized copy planned the driver is not asked.
        let unasked = || -> Result<i32> { panic!("the driver was asked") };
        assert_eq!(
            CopyPlan::Whole.resolve(unasked).unwrap(),
            Some(StagedCopy::Whole)
        );
        assert_eq!(CopyPlan::None.resolve(unasked).unwrap(), None);
    }
}
