//! Why a target missed, told from the run's own numbers. Each target's row names its
//! explanation ([`Why`]); nothing is chosen by matching a target's name.
use crate::costs;
use crate::data::{self, size, Measurements, M};
use crate::metric::{self, TargetId, CRATE, UP_TO_64K};
use crate::select::Sel;
use crate::sweep::{Approach, SMALL_NS};

/// What the oracle agreement guards, said whether it holds.
pub const ORACLE_AGREEMENT_GUARDS: &str =
    "guards the baseline every crate/oracle target divides by: the harness's oracle (one timed \
     cycle per sample, right after an untimed settle cycle of its own, the approaches in a \
     shuffled order each repetition, p50, every element checked) must measure what the criterion \
     bench's oracle measures (its producer srb_produce_f64, iterations back to back, each complete \
     before the next, the batch's mean, one element read); it did not while the copy-based \
     approaches shared one destination, which over_copy's check had just read on the host before \
     the oracle's copy landed in it (35.95 µs against criterion's 22.4-25.5 µs at 64K), nor while \
     the approaches ran in one fixed order, the oracle always right after over_copy's \
     whole-capacity copy (18.13 µs against 13.10 at 16M/4K in run bd0c3a9)";

/// One kind of explanation of a missed target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// A mapped crate readback adds a second kernel after the producer where the oracle adds
    /// one small DMA (small-n latency ratios).
    SecondKernel,
    /// The staged transport copies its whole capacity whatever n (its small-n ratios).
    StagedCopiesCapacity,
    /// over_copy's ratio: the crate's small readback at capacity 16M against capacity 1M.
    OverCopy,
    /// The pack kernel's stores to mapped memory peak below the copy engine (the grid probe).
    MappedStores,
    /// The staged readback packs into its device slot before its one copy.
    StagedPack,
    /// The sized staged copy: a graph launch of the pack and a SWITCH node whose body copies
    /// the count's size class, against the oracle's one copy.
    SizedCopy,
    /// The sized staged readback against its floor, the same graph launched alone (p50
    /// distance up to 64K): what the readback engine adds, split into the host's enqueue and
    /// wait.
    SizedOverFloor,
    /// The sized staged readback's bandwidth at 16M against its floor's: the same pack and body
    /// copy, so what the engine adds beyond its host work is device time.
    SizedBandwidthOverFloor,
    /// The sized staged enqueue sets the graph's kernel node and launches the graph, where
    /// the mapped enqueue launches one kernel and the whole-slot staged one a kernel and a
    /// copy.
    EnqueueGraph,
    /// The seed loop with little CPU work, the sized staged copy: the wait holds the graph
    /// (pack, then the copy of the count's class) and an event wake.
    LoopSized,
    /// The seed loop: the readback's wait and the next launch could not overlap the kernel.
    LoopNoOverlap,
    /// The seed loop with CPU work about equal to the kernel's time: within the noise.
    LoopEqualCpu,
    /// The seed loop with little CPU work: the staged wait holds a pack, a whole-slot copy and
    /// an event wake.
    LoopLittleCpu,
    /// The realistic producer's latencies, every approach.
    Realistic,
    /// The append reservation's driver calls.
    AppendCalls,
    /// The enqueue's driver calls, against their floor.
    EnqueueCalls,
    /// The sized staged enqueue's driver calls, against their floor.
    EnqueueSizedCalls,
    /// What the oracle agreement guards (whether it holds), and its worst point.
    OracleAgreement,
    /// The sized step: a SWITCH graph per step against a round trip or an over-launch.
    SizedStep,
}

impl Why {
    /// Whether the target carries it when it holds too: a target that guards a measurement
    /// rather than a speed says what it guards.
    pub fn always(self) -> bool {
        self == Why::OracleAgreement
    }

    /// The explanation for target `id` in run `m` (`holds`: whether the target held).
    pub fn text(self, id: TargetId, m: &Measurements, holds: bool) -> String {
        let lat = |cap: usize, n: usize, a: Approach| m.p50(cap, n, a.name());
        let call = |k: &str| m.costs.p50(k);
        let rlat = |n: usize, a: Sel| {
            m.realistic_at(n, a.name())
                .map_or(f64::NAN, |x| x.latency_us.p50)
        };
        match self {
            Why::SecondKernel => {
                let (a, b) = match id {
                    TargetId::SmallN(a, b) => (a, b),
                    _ => (CRATE, Approach::Sync),
                };
                let n = SMALL_NS
                    .iter()
                    .copied()
                    .max_by(|&x, &y| {
                        let r = |n| lat(M, n, a) / lat(M, n, b);
                        r(x).total_cmp(&r(y))
                    })
                    .unwrap_or(1);
                let also = if matches!(b, Approach::Oracle | Approach::Sync) {
                    String::new()
                } else {
                    format!(", {} {:.2}", b.name(), lat(M, n, b))
                };
                let who = if a == CRATE { "crate" } else { a.name() };
                format!(
                    "at n = {n}: producer alone {:.2} µs, oracle {:.2}, {who} {:.2}, sync {:.2}{also}. \
                     The crate adds a second kernel after the producer (host launch ~{:.1} µs, GPU \
                     launch, one system fence and the mapped trailer write) where the oracle adds one \
                     small DMA; sync on this host costs only {:.2} µs more than the oracle, so 0.75 x \
                     sync = {:.2} x oracle, below the crate's floor here. Removing the second kernel (a \
                     fused producer or a CUDA graph, see shared/reference/h200-baselines.md) is what \
                     would close it",
                    lat(M, n, Approach::ProducerOnly),
                    lat(M, n, Approach::Oracle),
                    lat(M, n, a),
                    lat(M, n, Approach::Sync),
                    call(costs::PRODUCER_LAUNCH),
                    lat(M, n, Approach::Sync) - lat(M, n, Approach::Oracle),
                    0.75 * lat(M, n, Approach::Sync) / lat(M, n, Approach::Oracle),
                )
            }
            Why::StagedCopiesCapacity => format!(
                "the staged transport copies the whole capacity by design (see its own bandwidth at \
                 n = 16M): crate_staged {:.1} µs p50 at n = 1, cap 1M, against {:.1} at 64K",
                lat(M, 1, Approach::Staged),
                lat(M, 65536, Approach::Staged),
            ),
            Why::OverCopy => format!(
                "over_copy copies the whole capacity (128 MiB) every cycle: {:.1} µs at n = 4096, \
                 cap 16M; the crate took {:.2} µs there against {:.2} µs at cap 1M: the ratio \
                 misses where the crate's small readback is slower at the large capacity",
                lat(16 * M, 4096, Approach::OverCopy),
                lat(16 * M, 4096, CRATE),
                lat(M, 4096, CRATE),
            ),
            Why::MappedStores => {
                let best = m
                    .probe
                    .iter()
                    .filter(|g| g.n == 16 * M)
                    .map(|g| g.gbps)
                    .fold(0.0, f64::max);
                format!(
                    "the pack kernel's stores to mapped host memory peak at {best:.2} GB/s over every \
                     grid cap tried (grid probe), below the copy engine's DMA; more blocks or bytes in \
                     flight do not help"
                )
            }
            Why::StagedPack => {
                let a = match id {
                    TargetId::Bandwidth16M(a) => a,
                    _ => Approach::Staged,
                };
                let pack = format!(
                    "the staged readback packs the rows into its device slot (a device-to-device \
                     pass over the 128 MiB) before its one copy of the slot, which the oracle does \
                     not: {} {:.1} µs against the oracle's {:.1} µs p50 at n = 16M",
                    a.name(),
                    lat(16 * M, 16 * M, a),
                    lat(16 * M, 16 * M, Approach::Oracle),
                );
                if a != Approach::StagedSized {
                    return pack;
                }
                // The same pack then a stream copy of the slot: what is left is the graph's copy.
                let bare = Approach::StagedSizedBare;
                format!(
                    "{pack}; {} (the same pack, then one stream copy of the slot) took {:.1} µs: the \
                     rest is the graph's body copy, which moves the same bytes more slowly than a \
                     stream copy: {} (the library's graph launched alone, without the readback) \
                     took {:.1} µs in this run, {:.3} of the oracle's bandwidth",
                    Approach::Staged.name(),
                    lat(16 * M, 16 * M, Approach::Staged),
                    bare.name(),
                    lat(16 * M, 16 * M, bare),
                    lat(16 * M, 16 * M, Approach::Oracle) / lat(16 * M, 16 * M, bare),
                )
            }
            Why::SizedCopy => {
                let (a, b) = match id {
                    TargetId::UpTo64K(a, b) => (a, b),
                    _ => (Approach::StagedSized, Approach::Oracle),
                };
                let bare = Approach::StagedSizedBare;
                let at = |n: usize| {
                    let floor = if a == bare {
                        String::new()
                    } else {
                        format!(", {} {:.2}", bare.name(), lat(M, n, bare))
                    };
                    format!(
                        "n = {}: {} {:.2} µs, {} {:.2}{floor}, crate_staged (whole slot) {:.2}, \
                         producer alone {:.2}",
                        size(n),
                        a.name(),
                        lat(M, n, a),
                        b.name(),
                        lat(M, n, b),
                        lat(M, n, Approach::Staged),
                        lat(M, n, Approach::ProducerOnly),
                    )
                };
                let who = if a == bare {
                    "The bare graph (the library's sized-copy graph without the readback) is one \
                     graph launch"
                } else {
                    "The sized staged readback launches one graph"
                };
                format!(
                    "{}; {}; {}. {who} (the pack kernel node, then a SWITCH node whose body copies \
                     the header and the count's power-of-two class of rows, at most twice the \
                     count) where the oracle issues one copy of exactly n: the pack's \
                     device-to-device pass, the graph's node-to-node latency and up to 2x the bytes \
                     are what it adds",
                    at(1),
                    at(4096),
                    at(65536),
                )
            }
            Why::SizedOverFloor => {
                let (a, b) = match id {
                    TargetId::UpTo64KOver(a, b) => (a, b),
                    _ => (Approach::StagedSized, Approach::StagedSizedBare),
                };
                let over = |n: usize| lat(M, n, a) - lat(M, n, b);
                let n = UP_TO_64K
                    .iter()
                    .copied()
                    .max_by(|&x, &y| over(x).total_cmp(&over(y)))
                    .unwrap_or(1);
                let part = |a: Approach| {
                    data::at(&m.sweep, M, n, a.name())
                        .map_or((f64::NAN, f64::NAN), |x| (x.enqueue_us.p50, x.wait_us.p50))
                };
                let ((ea, wa), (eb, wb)) = (part(a), part(b));
                format!(
                    "at n = {}: {} {:.2} µs p50, {} (the same graph and kernel launched alone, no \
                     readback engine) {:.2}, {:.2} µs apart; oracle {:.2}. On the host the enqueue \
                     took {ea:.2} µs p50 against {eb:.2} (the readback's checks, its slot's lease, \
                     the ticket and the slot's event record around the same \
                     cuGraphExecKernelNodeSetParams and cuGraphLaunch, against that event record \
                     alone), the wait {wa:.2} against {wb:.2} (the ticket's wait on the slot's \
                     event and the trailer's decode, against an event synchronize and the same \
                     decode): {:.2} µs of the distance is the enqueue, {:.2} the wait",
                    size(n),
                    a.name(),
                    lat(M, n, a),
                    b.name(),
                    lat(M, n, b),
                    over(n),
                    lat(M, n, Approach::Oracle),
                    ea - eb,
                    wa - wb,
                )
            }
            Why::SizedBandwidthOverFloor => {
                let (a, b) = match id {
                    TargetId::Bandwidth16MOver(a, b) => (a, b),
                    _ => (Approach::StagedSized, Approach::StagedSizedBare),
                };
                let big = |a: Approach| lat(16 * M, 16 * M, a);
                format!(
                    "at n = 16M, cap 16M: {} {:.1} µs p50, {} {:.1}, {:.1} µs apart; crate_staged \
                     (the same pack, then one stream copy of the slot) {:.1}, oracle {:.1}. Both run \
                     the same pack kernel and the same graph body copy of the whole slot; the \
                     readback's fixed cost over the bare graph is {:.2} µs at n = 1 (cap 1M: {} \
                     {:.2} against {:.2}), so the rest of the gap is device time that grows with \
                     the bytes: the same 128 MiB packed and copied more slowly in the readback's \
                     graph than in the bare one in this run",
                    a.name(),
                    big(a),
                    b.name(),
                    big(b),
                    big(a) - big(b),
                    big(Approach::Staged),
                    big(Approach::Oracle),
                    lat(M, 1, a) - lat(M, 1, b),
                    a.name(),
                    lat(M, 1, a),
                    lat(M, 1, b),
                )
            }
            Why::EnqueueGraph => {
                let costs = crate::sweep::enqueue_cost_small_n(&m.sweep);
                let p = |a: Approach| costs.get(a.name()).map_or(f64::NAN, |s| s.max);
                let (a, b) = match id {
                    TargetId::EnqueueOver(a, b) => (a, b),
                    _ => (Approach::StagedSized, Approach::Staged),
                };
                format!(
                    "worst enqueue p50 over n = 1..4096: {} {:.2} µs, {:.2} over {}; crate_staged \
                     (a kernel launch and a copy) {:.2}, crate {:.2}, {} (the graph's two driver \
                     calls and an event record, without the readback) {:.2}: the sized staged \
                     enqueue sets the slot's graph's kernel node (cuGraphExecKernelNodeSetParams: \
                     the pack's parameter and the conditional handle) and launches the graph \
                     (cuGraphLaunch), where the mapped one launches one kernel and the whole-slot \
                     staged one a kernel and a copy; cuEventRecord {:.2} µs is common to all",
                    a.name(),
                    p(a),
                    p(a) - p(b),
                    if b == CRATE { "crate" } else { b.name() },
                    p(Approach::Staged),
                    p(CRATE),
                    Approach::StagedSizedBare.name(),
                    p(Approach::StagedSizedBare),
                    call(costs::EVENT_RECORD),
                )
            }
            Why::LoopSized => "with little CPU work the host mostly waits for the readback; the \
                 sized staged readback's wait holds its graph (the pack kernel node, then the copy \
                 of the count's class of rows) and an event wake, so it keeps less of the \
                 two-kernels-in-flight gain than the mapped transport, and the ratio moves with the \
                 host's event-wake latency from run to run"
                .to_string(),
            Why::LoopNoOverlap => "the readback's wait and the next kernel's launch could not overlap \
                 the kernel here; compare the loop's rows for each approach"
                .to_string(),
            Why::LoopEqualCpu => "with CPU work about equal to kernel time, both approaches already \
                 overlap the kernel with the host's work; the staged readback puts its pack kernel, a \
                 capacity-sized copy and an event wake on the host's wait, which sync's two small \
                 copies undercut by about as much as the two-kernels-in-flight gain; the difference \
                 is within run-to-run noise"
                .to_string(),
            Why::LoopLittleCpu => "with little CPU work the host mostly waits for the readback; the \
                 staged readback's wait holds its pack kernel, a copy of the whole slot (the loop's \
                 capacity, not the count) and an event wake, so it keeps less of the \
                 two-kernels-in-flight gain than the mapped transport, and the ratio moves with the \
                 host's event-wake latency from run to run"
                .to_string(),
            Why::Realistic => format!(
                "realistic producer p50 µs at n = 1 / 4096 / 64K: producer alone {:.2} / {:.2} / {:.2}, \
                 oracle {:.2} / {:.2} / {:.2}, pack {:.2} / {:.2} / {:.2}, append {:.2} / {:.2} / {:.2}",
                rlat(1, Sel::ProducerOnly),
                rlat(4096, Sel::ProducerOnly),
                rlat(65536, Sel::ProducerOnly),
                rlat(1, Sel::Oracle),
                rlat(4096, Sel::Oracle),
                rlat(65536, Sel::Oracle),
                rlat(1, Sel::Pack),
                rlat(4096, Sel::Pack),
                rlat(65536, Sel::Pack),
                rlat(1, Sel::Append),
                rlat(4096, Sel::Append),
                rlat(65536, Sel::Append),
            ),
            Why::AppendCalls => "the reservation's driver calls (cuStreamIsCapturing, cuStreamGetId) \
                 and the completion's cuEventRecord; see enqueue_cost_breakdown for their single costs"
                .to_string(),
            Why::EnqueueCalls => format!(
                "alone on an idle stream the safe enqueue cost {:.2} µs p50 in this run, right after \
                 the producer's launch {:.2}; the driver calls it makes, timed alone in the same run \
                 (current context, capture check, stream id, the launch with the programmatic \
                 attribute and a 408-byte parameter, the event record), cost {:.2} µs p50: the crate \
                 adds {:.2} µs to its floor; a plain producer launch cost {:.2}, cuEventRecord {:.2}",
                call(costs::ENQUEUE),
                call(costs::ENQUEUE_AFTER_LAUNCH),
                call(costs::DRIVER_FLOOR),
                call(costs::ENQUEUE) - call(costs::DRIVER_FLOOR),
                call(costs::PRODUCER_LAUNCH),
                call(costs::EVENT_RECORD),
            ),
            Why::EnqueueSizedCalls => format!(
                "alone on an idle stream the safe enqueue on the staged readback with the sized copy \
                 cost {:.2} µs p50 in this run; the driver calls it makes, timed alone in the same \
                 run (current context, capture check, stream id, the bare sized graph's kernel node \
                 set and graph launch, the event record), cost {:.2} µs p50: the crate adds {:.2} \
                 µs to its floor (the mapped enqueue {:.2} to its own); cuEventRecord {:.2}. Both \
                 launch their {} slots' graphs in turn",
                call(costs::ENQUEUE_SIZED),
                call(costs::SIZED_DRIVER_FLOOR),
                call(costs::ENQUEUE_SIZED) - call(costs::SIZED_DRIVER_FLOOR),
                call(costs::ENQUEUE) - call(costs::DRIVER_FLOOR),
                call(costs::EVENT_RECORD),
                crate::sweep::SLOTS,
            ),
            Why::OracleAgreement if holds => ORACLE_AGREEMENT_GUARDS.to_string(),
            Why::OracleAgreement => {
                let (cap, n) = metric::oracle_agreement(m).at;
                format!(
                    "{ORACLE_AGREEMENT_GUARDS}. Worst at {}/{}: oracle {:.2} µs, oracle_criterion_way \
                     {:.2}, oracle_after_host_read {:.2}, naive (a count copy more) {:.2}: an oracle \
                     near oracle_after_host_read means its destination is again warm in the host's \
                     cache when its copy lands; an oracle near naive with the criterion way away from \
                     both means the bench's way itself (its producer, back-to-back batch, batch mean) \
                     differs",
                    size(cap),
                    size(n),
                    lat(cap, n, Approach::Oracle),
                    lat(cap, n, Approach::OracleCriterionWay),
                    lat(cap, n, Approach::OracleAfterHostRead),
                    lat(cap, n, Approach::Naive),
                )
            }
            Why::SizedStep => {
                let cap = match id {
                    TargetId::SizedStep(_, _, cap) => cap,
                    _ => 1 << 20,
                };
                let p = |w: &str| m.sized_step_p50(cap, w).unwrap_or(f64::NAN);
                format!(
                    "p50 per step at cap {}: sync {:.2} µs, over {:.2}, sized {:.2}, sized-grid {:.2}, \
                     over-graph {:.2}, sized-graph {:.2}, sized-grid-graph {:.2}. \
                     Enqueued per step, each step is a graph launch (setter + SWITCH, or grid setter + \
                     the kernel), about 14 µs of device time whatever the count; recorded into the \
                     loop's graph only the setter node and the SWITCH's device-side launch remain per \
                     step (the exact grid: the grid setter node and its device-side update). \
                     Over-launch of the test body costs its early-exit blocks, little at a small capacity",
                    size(cap as usize),
                    p("sync"),
                    p("over"),
                    p("sized"),
                    p("sized-grid"),
                    p("over-graph"),
                    p("sized-graph"),
                    p("sized-grid-graph"),
                )
            }
        }
    }
}
