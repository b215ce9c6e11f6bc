// seed_fortran_kernel.cu: the CUDA side of the seed's Fortran port (examples/seed_fortran.f90):
// the seed's kernel, unchanged, and the thin extern "C" helpers the Fortran host code calls for
// the CUDA runtime calls the seed makes (launch, pinned and device memory, streams, events).
// Device addresses cross as unsigned long long (srb_devptr, integer(srb_devptr) in Fortran),
// streams and events as the runtime's handles (type(c_ptr) by value in Fortran). Each helper
// returns the cudaError_t of its call (0: cudaSuccess); seed_cuda_error_string describes one.
//
// Built by scripts/build-seed-fortran.sh: nvcc -O2 -c examples/seed_fortran_kernel.cu.
#include <cuda_runtime.h>
#include <cstdio>

typedef unsigned long long devptr; // srb_devptr

__global__
void kernel(double* d_array, int* d_size, int const k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i==0) {
        printf("in kernel: d_size = %i\n", *d_size);
        if (k==0) {
            *d_size = 5;
        } else if (k==1) {
            *d_size = 3;
        } else {
            *d_size = 4;
        }
        printf("in kernel: d_size set to %i\n", *d_size);
        for (int i=0; i<3000; ++i) {
            __nanosleep(1000000U);
        }
    }
    d_array[i] += (1.0+(2.0+k)*i);
}

extern "C" {

// kernel<<<num_blocks, block_size, 0, stream>>>(d_array, d_size, k); the launch's error.
int seed_launch_kernel(devptr d_array, devptr d_size, int k, int num_blocks, int block_size,
                       cudaStream_t stream)
{
    kernel<<<num_blocks, block_size, 0, stream>>>(reinterpret_cast<double*>(d_array),
                                                  reinterpret_cast<int*>(d_size), k);
    return (int)cudaGetLastError();
}

int seed_malloc_host(void** ptr, size_t bytes) { return (int)cudaMallocHost(ptr, bytes); }
int seed_free_host(void* ptr) { return (int)cudaFreeHost(ptr); }

int seed_malloc(devptr* ptr, size_t bytes)
{
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    *ptr = reinterpret_cast<devptr>(p);
    return (int)e;
}
int seed_free(devptr ptr) { return (int)cudaFree(reinterpret_cast<void*>(ptr)); }

int seed_memcpy_htod(devptr dst, const void* src, size_t bytes)
{
    return (int)cudaMemcpy(reinterpret_cast<void*>(dst), src, bytes, cudaMemcpyHostToDevice);
}

// cudaStreamCreateWithFlags(..., cudaStreamNonBlocking), as the seed's streams.
int seed_stream_create(cudaStream_t* stream)
{
    return (int)cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking);
}
int seed_stream_destroy(cudaStream_t stream) { return (int)cudaStreamDestroy(stream); }

// cudaEventCreateWithFlags(..., cudaEventDisableTiming), as the seed's events.
int seed_event_create(cudaEvent_t* event)
{
    return (int)cudaEventCreateWithFlags(event, cudaEventDisableTiming);
}
int seed_event_destroy(cudaEvent_t event) { return (int)cudaEventDestroy(event); }
int seed_event_record(cudaEvent_t event, cudaStream_t stream)
{
    return (int)cudaEventRecord(event, stream);
}

int seed_device_synchronize(void) { return (int)cudaDeviceSynchronize(); }

// The runtime's message for an error, NUL-terminated in buf[0..len).
void seed_cuda_error_string(int code, char* buf, size_t len)
{
    std::snprintf(buf, len, "%s", cudaGetErrorString((cudaError_t)code));
}

// Flushes C's stdout, where the kernel's printf lines land, before Fortran prints its own
// (the two runtimes buffer separately).
void seed_flush_stdout(void) { std::fflush(stdout); }

}  // extern "C"
