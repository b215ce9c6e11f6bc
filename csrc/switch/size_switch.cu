// size_switch.cu: the sized launch's class setter. One thread reads the device-resident count,
// picks the first size class whose n_max holds it, and sets the SWITCH conditional node that
// follows it in the sized launch's CUDA graph to that class, so that the body recorded for
// the class (a grid, a CUB call, a GEMM sized for n_max) runs and no other. A count that is
// negative, past the last class or of an unknown kind selects no body (the value `classes` is
// past the switch's last body: the driver runs none).
//
// The outcome goes to one status entry of pinned mapped host memory: raw count, status bits,
// class and the launch's `seq`. The host reads an entry only after an event that follows the
// whole launch has completed (SizedTicket::wait, or a synchronized replay), which makes every
// store of the kernel visible to it; so no system-scope fence orders the stores here, where it
// would delay the body by a wait on PCIe. `seq` tells the host whether the entry is still its
// launch's (a launch 256 later reuses it).
//
// Included after pack_switch.cu in the switch image set's one translation unit: it uses
// pack.cu's srb_read_count_at and cudaGraphSetConditional's declaration.

// Size classes one sized launch may have (the kernel parameter holds every bound).
#define SRB_SIZE_CLASSES_MAX 32

// The kernel's parameter, by value (288 bytes); src/sized_launch/params.rs mirrors it.
struct srb_size_switch_params {
    uint64_t count_ptr;   // the count's device address
    uint64_t status_ptr;  // this launch's srb_size_status (a device address of mapped memory)
    uint64_t seq;         // into the status entry: whose outcome it holds
    uint32_t count_kind;  // srb_count_kind
    uint32_t classes;     // bounds in n_max, 1..SRB_SIZE_CLASSES_MAX
    uint64_t n_max[SRB_SIZE_CLASSES_MAX];  // ascending; the last is the capacity
};

// One launch's outcome, in pinned mapped host memory (32 bytes).
struct srb_size_status {
    uint64_t raw;      // the count as read, widened (sign-extended for signed kinds)
    uint32_t status;   // srb_status bits: OK, NEGATIVE, OVER_CAPACITY or BAD_COUNT_KIND
    uint32_t klass;    // the body that ran, or `classes` for none
    uint64_t seq;      // the launch's sequence number
    uint64_t reserved;
};

extern "C" __global__ void srb_size_switch(const srb_size_switch_params p,
                                           const cudaGraphConditionalHandle srb_class_handle) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    uint64_t raw = 0, n = 0;
    uint32_t status = srb_read_count_at(p.count_ptr, p.count_kind, 0, &raw, &n);
    uint32_t k = p.classes;
    if (status == SRB_STATUS_OK) {
        for (uint32_t i = 0; i < p.classes && i < SRB_SIZE_CLASSES_MAX; ++i) {
            if (n <= p.n_max[i]) {
                k = i;
                break;
            }
        }
        if (k == p.classes) status = SRB_STATUS_OVER_CAPACITY;
    }
    cudaGraphSetConditional(srb_class_handle, k);
    srb_size_status* s = reinterpret_cast<srb_size_status*>(p.status_ptr);
    s->raw = raw;
    s->status = status;
    s->klass = k;
    s->seq = p.seq;
}
