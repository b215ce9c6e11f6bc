/* sync_count_inject.c: counts a process's host-blocking CUDA driver calls, from inside the
 * driver. Built as a shared library and named in CUDA_INJECTION64_PATH, it is loaded by the
 * driver at cuInit (as Nsight tools are) and subscribes to CUPTI's driver-API callbacks, so it
 * sees every call however the program reached the driver (cudarc loads libcuda with dlopen, so
 * an LD_PRELOAD shim would see nothing). At exit it writes one JSON object of call counts to
 * $SRB_SYNC_COUNT_OUT (stderr if unset).
 *
 * Counted: the calls that make the host wait on the device (stream, event and context
 * synchronize; the synchronous copies; the allocation calls that synchronize implicitly), the
 * queries a polling wait makes, the copies to the host (blocking when the destination is
 * pageable) and the host functions a stream or graph calls back; each in its per-thread
 * default-stream forms too. Not seen: a host spinning on mapped memory, which makes no driver
 * call (the caller's code has to show there is none).
 *
 * Build (GPU host): gcc -shared -fPIC -O2 -I$CUDA/include -I$CUDA/extras/CUPTI/include
 *   sync_count_inject.c -L<dir of libcupti.so> -lcupti -o libsynccount.so
 * (scripts/bfs-host-syncs.sh does it.) */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* const kNames[] = {
    "cuStreamSynchronize",      "cuStreamSynchronize_ptsz", "cuEventSynchronize",
    "cuCtxSynchronize",         "cuCtxSynchronize_v2",      "cuMemcpy",
    "cuMemcpy_ptds",            "cuMemcpyDtoH",             "cuMemcpyDtoH_v2",
    "cuMemcpyDtoH_v2_ptds",     "cuMemcpyHtoD",             "cuMemcpyHtoD_v2",
    "cuMemcpyHtoD_v2_ptds",     "cuMemcpyDtoD_v2",          "cuMemcpyDtoD_v2_ptds",
    "cuMemcpyDtoHAsync_v2",     "cuMemcpyDtoHAsync_v2_ptsz", "cuStreamQuery",
    "cuStreamQuery_ptsz",       "cuEventQuery",             "cuMemAlloc_v2",
    "cuMemFree_v2",             "cuMemHostAlloc",           "cuMemAllocHost_v2",
    "cuMemFreeHost",            "cuLaunchHostFunc",         "cuLaunchHostFunc_ptsz",
    "cuStreamAddCallback",      "cuStreamAddCallback_ptsz",
};
#define NAMES (sizeof(kNames) / sizeof(kNames[0]))
static unsigned long long counts[NAMES];
static unsigned long long all_calls;

static void CUPTIAPI on_call(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                             const void* data) {
    (void)user;
    (void)id;
    const CUpti_CallbackData* cb = (const CUpti_CallbackData*)data;
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cb->callbackSite != CUPTI_API_ENTER) return;
    __atomic_add_fetch(&all_calls, 1, __ATOMIC_RELAXED);
    for (size_t i = 0; i < NAMES; ++i) {
        if (strcmp(cb->functionName, kNames[i]) == 0) {
            __atomic_add_fetch(&counts[i], 1, __ATOMIC_RELAXED);
            return;
        }
    }
}

static void report(void) {
    const char* path = getenv("SRB_SYNC_COUNT_OUT");
    FILE* out = path ? fopen(path, "w") : stderr;
    if (!out) return;
    fprintf(out, "{\"driver_calls\": %llu, \"blocking\": {", all_calls);
    for (size_t i = 0; i < NAMES; ++i)
        fprintf(out, "%s\"%s\": %llu", i ? ", " : "", kNames[i], counts[i]);
    fprintf(out, "}}\n");
    if (out != stderr) fclose(out);
}

int InitializeInjection(void) {
    CUpti_SubscriberHandle subscriber;
    if (cuptiSubscribe(&subscriber, on_call, NULL) != CUPTI_SUCCESS) return 0;
    if (cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS) return 0;
    atexit(report);
    return 1;
}
