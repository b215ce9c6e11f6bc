// size_grid.cu: the sized launch's grid setter, for its exact-grid form (one class, one body
// kernel). One thread reads the device-resident count as the class setter does
// (switch/size_switch.cu) and sets the grid of the one kernel node that follows it, a
// device-updatable node (CUDA 12.4), to ceil(count / items_per_block) blocks, or disables the
// node for a count of 0 or one that selects no class; the outcome goes to the same status entry
// as the class setter's. The host checked at build that the capacity's grid fits in gridDim.x.
//
// An image set of its own (kernels/grid/), loaded only by the exact-grid form, so that the
// switch set, which every sized launch and staged sized copy loads, stays as it was: this one
// references device-runtime functions newer than the switch set's. NVRTC 12.8 compiles it, as
// the switch set. From pack.cu it takes srb_read_count_at and no kernel; from size_switch.cu
// the parameter and status structs (and the class setter, which this set does not use).
#define SRB_COUNT_READERS_ONLY 1
#include "../pack.cu"
typedef unsigned long long cudaGraphConditionalHandle;
extern "C" __device__ void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value);
#include "../switch/size_switch.cu"

// Device-runtime functions that NVRTC 12.8 resolves as builtins without relocatable device
// code (as cudaGraphSetConditional); declared here because NVRTC has no runtime headers.
typedef struct CUgraphDeviceUpdatableNode_st* cudaGraphDeviceNode_t;
extern "C" __device__ int cudaGraphKernelNodeSetGridDim(cudaGraphDeviceNode_t node, dim3 gridDim);
extern "C" __device__ int cudaGraphKernelNodeSetEnabled(cudaGraphDeviceNode_t node, bool enable);

extern "C" __global__ void srb_size_grid(const srb_size_switch_params p, const cudaGraphDeviceNode_t node,
                                         const uint64_t items_per_block) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    uint64_t raw = 0, n = 0;
    uint32_t status = srb_read_count_at(p.count_ptr, p.count_kind, 0, &raw, &n);
    uint32_t k = p.classes;
    if (status == SRB_STATUS_OK) {
        if (n <= p.n_max[0]) {
            k = 0;
        } else {
            status = SRB_STATUS_OVER_CAPACITY;
        }
    }
    // A refused update leaves the node as the last launch left it: its error code goes to the
    // entry's last word (reserved in the class setter's), which the host turns into an error.
    int refused = 0;
    if (k == 0 && n > 0) {
        refused = cudaGraphKernelNodeSetGridDim(node, dim3((unsigned)((n + items_per_block - 1) / items_per_block), 1, 1));
        if (refused == 0) refused = cudaGraphKernelNodeSetEnabled(node, true);
    } else {
        refused = cudaGraphKernelNodeSetEnabled(node, false);
    }
    srb_size_status* s = reinterpret_cast<srb_size_status*>(p.status_ptr);
    s->raw = raw;
    s->status = status;
    s->klass = k;
    s->reserved = (uint64_t)(uint32_t)refused;
    s->seq = p.seq;
}
