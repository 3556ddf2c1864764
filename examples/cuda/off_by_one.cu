// CUDA runtime example for a GPU: an off-by-one kernel writes one element past a cudaMalloc buffer.
//   redzone run -- ./off_by_one      -> REDZONE VIOLATION alloc#0 ... bytes [0..=3] past the end were written
#include <cstdio>
#include <cuda_runtime.h>

__global__ void scale(float *v, int n, float k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) // the bug: <= n
        v[i] = v[i] * k;
}

int main() {
    const int n = 1000;
    float *v = nullptr;
    if (cudaMalloc(&v, n * sizeof(float)) != cudaSuccess) {
        std::fprintf(stderr, "off_by_one: cudaMalloc failed\n");
        return 1;
    }
    cudaMemset(v, 0, n * sizeof(float));
    scale<<<(n + 255) / 256, 256>>>(v, n, 2.0f);
    cudaError_t e = cudaDeviceSynchronize();
    std::printf("off_by_one: kernel finished: %s\n", cudaGetErrorString(e));
    cudaFree(v);
    return e == cudaSuccess ? 0 : 1;
}
