// pack_switch.cu: the staged transport's sized copy. The pack kernel of pack.cu, compiled as
// `srb_pack_switch`, which also takes the conditional handle of the SWITCH node that follows it
// in the slot's CUDA graph and sets it to the size class of the rows it copied: class k copies
// min(2^k, capacity) rows of every column (k = 0 for 0 or 1 row), so the device-to-host copy
// moves what the count needs instead of the whole slot. The class stays within the switch's
// bodies because copy_n never exceeds the capacity (pack.cu copies nothing past it).
//
// cudaGraphSetConditional is a device-runtime function that NVRTC 12.8 resolves as a builtin
// without relocatable device code; it is declared here because NVRTC has no runtime headers.
// Conditional nodes need a CUDA 12.8 (R570) driver for SWITCH: the library loads this image set
// only where cuDriverGetVersion says 12080 or newer.
typedef unsigned long long cudaGraphConditionalHandle;
extern "C" __device__ void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value);

// The smallest k with 2^k >= n (0 for n <= 1): the switch body that copies n rows.
__device__ __forceinline__ unsigned int srb_size_class(unsigned long long n) {
    return n <= 1 ? 0u : 64u - (unsigned int)__clzll(n - 1);
}

#define SRB_PACK_SWITCH 1
#define SRB_PACK_NAME srb_pack_switch
#define SRB_PACK_EXTRA_PARAMS , const cudaGraphConditionalHandle srb_class_handle
#define SRB_PACK_SET_CLASS(copy_n) cudaGraphSetConditional(srb_class_handle, srb_size_class(copy_n))
#include "../pack.cu"
