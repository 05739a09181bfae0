// Linked by test/test_find_nccl.sh with the flags the Makefile chose: prints the
// NCCL version its header says and the version of the library the loader found.
// Needs no GPU (ncclGetVersion touches no device).
#include <cstdio>

#include <nccl.h>

int main() {
    int version = 0;
    if (ncclGetVersion(&version) != ncclSuccess) {
        fprintf(stderr, "ncclGetVersion failed\n");
        return 1;
    }
    printf("header %d library %d\n", NCCL_VERSION_CODE, version);
    return NCCL_VERSION_CODE == version ? 0 : 1;
}
