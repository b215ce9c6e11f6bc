// seed_capi.cu: the seed's original C++ program (shared/seed/000_22854d1e0a2c547f.txt) with only
// its `communication` function and its waits (`cudaEventSynchronize(copy_done)`) changed to the
// sized-readback C API. Everything else -- the kernel, the streams, the events, the loop, cpuWork
// -- is the seed's code. It prints the seed's *expected* output (src/testing/seed.rs, EXPECTED), plus the
// kernel's own "in kernel:" lines.
//
// Build (on a machine with nvcc; the static library is built by
// `cargo build --release -p sized-readback-clib`):
//
//   nvcc -O2 -std=c++17 -o seed_capi examples/seed_capi.cu -Icapi/include -Iinclude \
//        target/release/libsized_readback.a -lpthread -ldl -lm -lrt
//
// or `scripts/build-seed-capi.sh [LIBDIR] [OUTPUT]`. The library loads libcuda itself (dlopen) and
// works in the runtime API's primary context, so the runtime's pointers, streams and events are
// passed as they are.
#include <cuda_runtime.h>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "sized_readback.h"

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

// ---- changed: communication and the wait ------------------------------------------------------

// The seed's bufferSize: each d_array half holds this many doubles, so a slot holds as many.
static const size_t kCapacity = 1 << 18;

static void srb_check(int code, const char* what)
{
    if (code != SRB_OK) {
        std::cerr << what << " failed (" << code << "): " << srb_last_error() << std::endl;
        std::exit(1);
    }
}

// The readback in flight, and where the seed's copies would have put its count and data.
static struct {
    srb_readback* rb = nullptr;
    uint64_t seq = 0;
    int* h_size = nullptr;
    double* h_array = nullptr;
} pending;

void communication(int * h_size, int const * d_size,
                   double * h_array, double const * d_array,
                   cudaStream_t copy_stream,
                   cudaEvent_t compute_done,
                   cudaEvent_t copy_done)
{
    (void)copy_done; // the readback's own completion takes its place
    // One small kernel on copy_stream, after compute_done, reads *d_size on the device and copies
    // that many doubles into pinned memory: no host read of the size, no host synchronization.
    srb_devptr column = (srb_devptr)d_array;
    size_t len = kCapacity;
    srb_check(srb_enqueue(pending.rb, copy_stream, compute_done, &column, &len, (srb_devptr)d_size,
                          SRB_COUNT_I32, &pending.seq),
              "srb_enqueue");
    pending.h_size = h_size;
    pending.h_array = h_array;
}

// Added at the top of main: one column of doubles, two slots, mapped pinned memory, device 0
// (the seed's). On a machine without a driver or GPU this prints the library's error and exits 1
// before the seed's code touches the runtime.
void open_readback()
{
    size_t elem_size = sizeof(double);
    srb_check(srb_create(0, kCapacity, 2, 1, &elem_size, 0, &pending.rb), "srb_create");
}

// Replaces cudaEventSynchronize(copy_done): waits for the readback, then puts the count and the
// data where the seed's two cudaMemcpyAsync calls would have put them.
void wait_for_communication()
{
    uint64_t n = 0;
    srb_check(srb_wait(pending.rb, pending.seq, -1, &n), "srb_wait");
    const double* data = static_cast<const double*>(srb_data(pending.rb, pending.seq, 0));
    std::memcpy(pending.h_array, data, n * sizeof(double));
    *pending.h_size = (int)n;
    srb_check(srb_release(pending.rb, pending.seq), "srb_release");
}

// ---- the seed's code, unchanged except for the two waits ---------------------------------------

void cpuWork(int const k, double const * h_array, int const * h_size)
{
    // here we check the values in h_array
    std::cout << "From kernel launch " << k << std::endl;
    for (int i=0; i<7; ++i) {
        std::cout << "h_array[" << i << "] = " << h_array[i] << std::endl;
    }
    std::cout << "h_size[" << k%2 << "] = " << h_size[k%2] << std::endl;
}

int main() {
    open_readback(); // added

    int bufferSize = 1<<18;
    int blockSize = 256;
    int numBlocks = (bufferSize + blockSize - 1)/blockSize;

    int *h_size;
    cudaMallocHost((void**)&h_size, 2*sizeof(int));
    h_size[0] = 2;
    h_size[1] = 7;

    int *d_size;
    cudaMalloc((void**)&d_size, 2*sizeof(int));
    cudaMemcpy(d_size, h_size, 2*sizeof(int), cudaMemcpyHostToDevice);

    double *h_array;
    cudaMallocHost((void**)&h_array, bufferSize*sizeof(double));
    for (int i=0; i<bufferSize; ++i) {h_array[i] = 0.14;}

    double *d_array;
    cudaMalloc((void**)&d_array, 2*bufferSize*sizeof(double));
    cudaMemcpy(d_array, h_array, bufferSize*sizeof(double), cudaMemcpyHostToDevice);
    cudaMemcpy(&d_array[bufferSize], h_array, bufferSize*sizeof(double), cudaMemcpyHostToDevice);

    cudaStream_t compute_stream[2], copy_stream;
    cudaEvent_t compute_done[2], copy_done;

    cudaStreamCreateWithFlags(&compute_stream[0], cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&compute_stream[1], cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&copy_stream, cudaStreamNonBlocking);

    cudaEventCreateWithFlags(&compute_done[0], cudaEventDisableTiming);
    cudaEventCreateWithFlags(&compute_done[1], cudaEventDisableTiming);
    cudaEventCreateWithFlags(&copy_done, cudaEventDisableTiming);
    cudaDeviceSynchronize();

    // Launch the first kernel outside the FOR loop
    kernel<<<numBlocks, blockSize, 0, compute_stream[0]>>>(d_array, &d_size[0], 0);
    cudaEventRecord(compute_done[0], compute_stream[0]);

    int numCycles = 3;

    for (int k=1; k<numCycles; ++k) {

        // Communicate D-->H from the previous kernel launch, indexed k-1
        communication(&h_size[(k-1)%2], &d_size[(k-1)%2],
                      h_array, &d_array[((k-1)%2)*bufferSize],
                      copy_stream, compute_done[(k-1)%2], copy_done);

        // Goal is to have this kernel start "asap" (even before the previous kernel has finished,
        // if the device has the capacity)
        kernel<<<numBlocks, blockSize, 0, compute_stream[k%2]>>>(
            &d_array[(k%2)*bufferSize], &d_size[k%2], k);
        cudaEventRecord(compute_done[k%2], compute_stream[k%2]);

        // Now do stuff on the CPU with h_array received from the (k-1)-th kernel launch
        wait_for_communication(); // was: cudaEventSynchronize(copy_done);
        cpuWork(k-1, h_array, h_size);
    }

    // Get results from the last cycle
    int k = numCycles-1;
    communication(&h_size[k%2], &d_size[k%2],
                  h_array, &d_array[(k%2)*bufferSize],
                  copy_stream, compute_done[k%2], copy_done);

    // Now do work on the CPU with h_array received from the last kernel launch
    wait_for_communication(); // was: cudaEventSynchronize(copy_done);
    cpuWork(k, h_array, h_size);

    // clean
    srb_destroy(pending.rb); // added: the readback goes before the streams it used
    for (int i=0; i<2; ++i) {cudaEventDestroy(compute_done[i]);
                             cudaStreamDestroy(compute_stream[i]);}
    cudaEventDestroy(copy_done); cudaStreamDestroy(copy_stream);
    cudaFree(d_array); cudaFree(d_size);
    cudaFreeHost(h_array); cudaFreeHost(h_size);

    return 0;
}
