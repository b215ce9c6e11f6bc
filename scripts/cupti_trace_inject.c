/* cupti_trace_inject.c: a kernel and copy timeline of a process, from CUPTI's activity API,
 * for the GPU host, whose nsys records a trace it cannot import. Built as a shared library
 * and named in CUDA_INJECTION64_PATH, it is loaded by the driver at cuInit and writes one CSV
 * line per kernel, copy and memset to $SRB_TRACE_OUT (stderr if unset) when the process exits:
 *
 *   kind,name,start_ns,end_ns,bytes,grid,block,stream,graph_node
 *
 * `name` is the kernel's (mangled) name or the copy's kind (HtoD, DtoH, DtoD, ...; "memset"
 * for a memset); `bytes` is 0 for a kernel; `grid` and `block` are "x.y.z" (empty for a
 * copy); `graph_node` is nonzero for work launched as a node of a CUDA graph. Times are the
 * GPU's timestamps in ns. scripts/cupti-trace.sh builds it, runs a command under it and
 * summarizes the CSV (time and bandwidth per kernel and copy kind).
 *
 * Build (GPU host): gcc -shared -fPIC -O2 -I$CUDA/include -I$CUDA/extras/CUPTI/include
 *   cupti_trace_inject.c -L<dir of libcupti.so> -lcupti -o libcuptitrace.so */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUFFER_BYTES (8u << 20)

static FILE* out;

static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = (uint8_t*)aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static const char* copy_kind(uint8_t kind) {
    switch (kind) {
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
        case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
        default: return "copy";
    }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size,
                                      size_t valid) {
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity* record = NULL;
    while (out && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        switch (record->kind) {
            case CUPTI_ACTIVITY_KIND_KERNEL:
            case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
                const CUpti_ActivityKernel10* k = (const CUpti_ActivityKernel10*)record;
                fprintf(out, "kernel,%s,%llu,%llu,0,%d.%d.%d,%d.%d.%d,%u,%llu\n",
                        k->name ? k->name : "?", (unsigned long long)k->start,
                        (unsigned long long)k->end, k->gridX, k->gridY, k->gridZ, k->blockX,
                        k->blockY, k->blockZ, k->streamId, (unsigned long long)k->graphNodeId);
                break;
            }
            case CUPTI_ACTIVITY_KIND_MEMCPY: {
                const CUpti_ActivityMemcpy6* m = (const CUpti_ActivityMemcpy6*)record;
                fprintf(out, "copy,%s,%llu,%llu,%llu,,,%u,%llu\n", copy_kind(m->copyKind),
                        (unsigned long long)m->start, (unsigned long long)m->end,
                        (unsigned long long)m->bytes, m->streamId,
                        (unsigned long long)m->graphNodeId);
                break;
            }
            case CUPTI_ACTIVITY_KIND_MEMSET: {
                const CUpti_ActivityMemset4* m = (const CUpti_ActivityMemset4*)record;
                fprintf(out, "memset,memset,%llu,%llu,%llu,,,%u,%llu\n",
                        (unsigned long long)m->start, (unsigned long long)m->end,
                        (unsigned long long)m->bytes, m->streamId,
                        (unsigned long long)m->graphNodeId);
                break;
            }
            default:
                break;
        }
    }
    free(buffer);
}

static void finish(void) {
    cuptiActivityFlushAll(1);
    if (out && out != stderr) fclose(out);
    out = NULL;
}

int InitializeInjection(void) {
    const char* path = getenv("SRB_TRACE_OUT");
    out = path ? fopen(path, "w") : stderr;
    if (!out) return 0;
    fprintf(out, "kind,name,start_ns,end_ns,bytes,grid,block,stream,graph_node\n");
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) return 0;
    if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) return 0;
    if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS) return 0;
    if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS) return 0;
    atexit(finish);
    return 1;
}
