/*
 * A CUDA runtime program on a machine whose driver cannot serve it (tests/driver_start.py, the NVIDIA driver
 * 535 without a GPU: the CUDA 13 runtime refuses that CUDA 12.2 driver with cudaErrorInsufficientDriver
 * before calling cuInit). It names the libcuda.so.1 it is given (loaded first, so the runtime's own dlopen
 * finds the same one), tries cudaMalloc and cudaGetDeviceCount, and exits with the error's number. Built
 * with nvcc twice: -cudart static and -cudart shared.
 */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    struct link_map *map = NULL;
    if (h == NULL || dlinfo(h, RTLD_DI_LINKMAP, &map) != 0 || map == NULL) {
        fprintf(stderr, "rzstart_rt: libcuda.so.1 cannot be loaded\n");
        return 1;
    }
    char *real = realpath(map->l_name, NULL);
    printf("rzstart_rt: driver %s\n", real ? real : map->l_name);
    free(real);
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, 256);
    printf("rzstart_rt: cudaMalloc: %s\n", cudaGetErrorName(e));
    int n = -1;
    cudaError_t c = cudaGetDeviceCount(&n);
    printf("rzstart_rt: cudaGetDeviceCount: %s, %d\n", cudaGetErrorName(c), n);
    if (e == cudaSuccess)
        cudaFree(p);
    return (int)e;
}
