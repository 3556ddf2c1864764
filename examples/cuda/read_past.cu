// CUDA runtime example for a GPU: a kernel reads one element past a cudaMalloc buffer, so its output
// depends on what follows the buffer. Run it with two fills and compare:
//   redzone run --fill 0 -- ./read_past ; redzone run --fill 1 -- ./read_past
#include <cstdio>
#include <cuda_runtime.h>

__global__ void total(const unsigned char *v, int n, unsigned long long *out) {
    unsigned long long s = 0;
    for (int i = 0; i <= n; i++) // the bug: <= n
        s += v[i];
    *out = s;
}

int main() {
    const int n = 1000;
    unsigned char *v = nullptr;
    unsigned long long *out = nullptr, host = 0;
    if (cudaMalloc(&v, n) != cudaSuccess || cudaMalloc(&out, sizeof *out) != cudaSuccess) {
        std::fprintf(stderr, "read_past: cudaMalloc failed\n");
        return 1;
    }
    cudaMemset(v, 1, n);
    total<<<1, 1>>>(v, n, out);
    cudaMemcpy(&host, out, sizeof host, cudaMemcpyDeviceToHost);
    std::printf("read_past: sum = %llu\n", host);
    cudaFree(v);
    cudaFree(out);
    return 0;
}
