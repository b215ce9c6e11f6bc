// consumer.cpp: a C++17 program on the installed C API. With -DSRB_WITH_CUDA_H it includes
// <cuda.h> and <cuda_runtime_api.h> first, and passes the toolkit's stream and event types as
// they are: the C API's declarations of CUstream_st and CUevent_st agree with the toolkit's.
#ifdef SRB_WITH_CUDA_H
#include <cuda.h>
#include <cuda_runtime_api.h>
#endif
#include <cstdio>
#include <cstring>

#include "sized_readback.h"

#ifdef SRB_WITH_CUDA_H
// The toolkit's handle types are the C API's parameter types.
static_assert(sizeof(CUstream) == sizeof(CUstream_st *), "CUstream is a struct CUstream_st *");
static int takes_cuda_types(srb_readback *rb, CUstream s, cudaEvent_t e) {
    srb_devptr column = 0;
    size_t len = 0;
    uint64_t seq = 0;
    return srb_enqueue(rb, s, e, &column, &len, 0, SRB_COUNT_I32, &seq);
}
#endif

int main() {
    const size_t elem = sizeof(float);
    srb_readback *rb = nullptr;
    int rc = srb_create(0, 0, 2, 1, &elem, 0, &rb);
    if (rc != SRB_ERR_INVALID_CONFIG || rb != nullptr) {
        std::fprintf(stderr, "consumer++: zero capacity gave %d (%s)\n", rc, srb_last_error());
        return 2;
    }
#ifdef SRB_WITH_CUDA_H
    if (takes_cuda_types(nullptr, nullptr, nullptr) != SRB_ERR_INVALID_ARGUMENT) {
        std::fprintf(stderr, "consumer++: a null readback was accepted\n");
        return 2;
    }
#endif
    rc = srb_create(0, 1024, 2, 1, &elem, 0, &rb);
    if (rc != SRB_OK) {
        std::fprintf(stderr, "consumer++: srb_create failed (%d): %s\n", rc, srb_last_error());
        return 1;
    }
    std::printf("consumer++: a readback of capacity %zu\n", srb_capacity(rb));
    srb_destroy(rb);
    return 0;
}
