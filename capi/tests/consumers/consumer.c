/* consumer.c: a C99 program on the installed C API, built by `cargo xtask packages` through
 * CMake, pkg-config and a plain cc command. It needs no CUDA header.
 *
 * Exit 0: the readback was created (a GPU is present). Exit 1: srb_create failed with the
 * library's message on stderr (no driver or no GPU: what CI expects). Exit 2: the library's
 * checks that need no GPU gave a wrong answer. */
#include <stdio.h>
#include <string.h>

#include "sized_readback.h"

int main(void) {
    size_t elem = sizeof(double);
    srb_readback *rb = NULL;
    /* Settings are checked before the device is opened: the same answer with or without a GPU. */
    int rc = srb_create(0, 0, 2, 1, &elem, 0, &rb);
    if (rc != SRB_ERR_INVALID_CONFIG || rb != NULL || strstr(srb_last_error(), "capacity") == NULL) {
        fprintf(stderr, "consumer: zero capacity gave %d (%s), expected SRB_ERR_INVALID_CONFIG\n", rc,
                srb_last_error());
        return 2;
    }
    rc = srb_create(0, 1024, 2, 1, &elem, 0, &rb);
    if (rc != SRB_OK) {
        fprintf(stderr, "consumer: srb_create failed (%d): %s\n", rc, srb_last_error());
        return 1;
    }
    printf("consumer: a readback of capacity %zu\n", srb_capacity(rb));
    srb_destroy(rb);
    return 0;
}
