// The GPU run's CUDA runtime program (tests/gpu/run builds it with nvcc on a GPU machine; it needs the real
// runtime and a GPU, so the emulated rehearsal skips it). An ordinary program that knows nothing of redzone;
// the first argument picks the bug. Every overrun writes 8 bytes past a 1000-byte buffer (value 0x5a) from a
// kernel with its own name, so the report's kernel list can be checked.
//
//   runtime_prog malloc|async|managed|pitch|graph|nosync|clean   the write past the end, by allocation kind
//   runtime_prog readpast                                        a read one byte past the end (bisect)
//   runtime_prog guard                                           a write past a 1024-byte buffer (run with
//                                                                METRALE_REDZONE_GUARD=idx:0: it faults)
//   runtime_prog devbp                                           a kernel to stop in (cuda-gdb, built -G)
//   runtime_prog workload STEPS PER_STEP                         PER_STEP cudaMalloc, 2 launches, a
//                                                                synchronisation, PER_STEP cudaFree per step
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <cuda_runtime.h>

#define CK(call)                                                                                             \
    do {                                                                                                     \
        cudaError_t e_ = (call);                                                                             \
        if (e_ != cudaSuccess) {                                                                             \
            std::fprintf(stderr, "runtime_prog:%d: %s: %s\n", __LINE__, #call, cudaGetErrorName(e_));         \
            std::exit(1);                                                                                    \
        }                                                                                                    \
    } while (0)

static const int N = 1000, EXTRA = 8;

#define OVERRUN_KERNEL(name)                                                                                 \
    __global__ void name(unsigned char *buf, int n, int extra) {                                             \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                                       \
        if (i < n + extra)                                                                                   \
            buf[i] = 0x5a;                                                                                   \
    }
OVERRUN_KERNEL(overrun_malloc)
OVERRUN_KERNEL(overrun_async)
OVERRUN_KERNEL(overrun_managed)
OVERRUN_KERNEL(overrun_pitch)
OVERRUN_KERNEL(overrun_graph)
OVERRUN_KERNEL(overrun_nosync)
OVERRUN_KERNEL(overrun_guard)
OVERRUN_KERNEL(touch)

// For the device-breakpoint session: cuda-gdb stops on the marked line, inside the kernel.
__global__ void devbp_kernel(unsigned char *buf, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n)
        buf[i] = 0x5a; // gpurun: device breakpoint
}

__global__ void sum_past(const unsigned char *buf, int n, unsigned long long *out) {
    unsigned long long s = 0;
    for (int i = 0; i <= n; i++) // the bug: <= n
        s += buf[i];
    *out = s;
}

static int blocks(int n) { return (n + 255) / 256; }

int main(int argc, char **argv) {
    const char *m = argc > 1 ? argv[1] : "";
    unsigned char *p = nullptr;
    int extra = std::strcmp(m, "clean") == 0 ? 0 : EXTRA;
    if (!std::strcmp(m, "malloc") || !std::strcmp(m, "clean")) {
        CK(cudaMalloc(&p, N));
        overrun_malloc<<<blocks(N + extra), 256>>>(p, N, extra);
        CK(cudaDeviceSynchronize());
        CK(cudaFree(p));
    } else if (!std::strcmp(m, "async")) {
        cudaStream_t s;
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        CK(cudaMallocAsync(&p, N, s));
        overrun_async<<<blocks(N + EXTRA), 256, 0, s>>>(p, N, EXTRA);
        CK(cudaFreeAsync(p, s));
        CK(cudaStreamSynchronize(s));
    } else if (!std::strcmp(m, "managed")) {
        CK(cudaMallocManaged(&p, N));
        overrun_managed<<<blocks(N + EXTRA), 256>>>(p, N, EXTRA);
        CK(cudaDeviceSynchronize());
        CK(cudaFree(p));
    } else if (!std::strcmp(m, "pitch")) {
        size_t pitch = 0;
        const int height = 4;
        CK(cudaMallocPitch(&p, &pitch, N, height));
        int n = (int)pitch * height; // past the last row
        overrun_pitch<<<blocks(n + EXTRA), 256>>>(p, n, EXTRA);
        CK(cudaDeviceSynchronize());
        CK(cudaFree(p));
    } else if (!std::strcmp(m, "graph")) {
        // A graph that allocates a scratch buffer, runs a correct kernel on it and frees it (mem alloc and
        // free nodes, made by the driver at graph launch), plus a kernel node that writes past a cudaMalloc
        // buffer made outside the graph.
        CK(cudaMalloc(&p, N));
        cudaStream_t s;
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        cudaGraph_t g;
        cudaGraphExec_t ge;
        unsigned char *scratch = nullptr;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        CK(cudaMallocAsync(&scratch, 4096, s));
        touch<<<blocks(4096), 256, 0, s>>>(scratch, 4096, 0);
        overrun_graph<<<blocks(N + EXTRA), 256, 0, s>>>(p, N, EXTRA);
        CK(cudaFreeAsync(scratch, s));
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        CK(cudaGraphLaunch(ge, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));
        CK(cudaFree(p));
    } else if (!std::strcmp(m, "nosync")) {
        CK(cudaMalloc(&p, N));
        overrun_nosync<<<blocks(N + EXTRA), 256>>>(p, N, EXTRA);
        CK(cudaFree(p)); // no synchronisation before the free
        CK(cudaDeviceSynchronize());
    } else if (!std::strcmp(m, "readpast")) {
        unsigned long long *out = nullptr, host = 0;
        CK(cudaMalloc(&out, sizeof *out));
        CK(cudaMalloc(&p, N));
        CK(cudaMemset(p, 1, N));
        sum_past<<<1, 1>>>(p, N, out);
        CK(cudaMemcpy(&host, out, sizeof host, cudaMemcpyDeviceToHost));
        std::printf("runtime_prog: sum = %llu\n", host);
        CK(cudaFree(p));
        CK(cudaFree(out));
    } else if (!std::strcmp(m, "guard")) {
        unsigned char *q = nullptr;
        CK(cudaMalloc(&p, 1024)); // alloc#0: a multiple of 256, ends where mapped memory ends
        CK(cudaMalloc(&q, N));    // an ordinary band, for the exit scan to (fail to) read
        overrun_guard<<<blocks(1024 + EXTRA), 256>>>(p, 1024, EXTRA);
        cudaError_t e = cudaDeviceSynchronize();
        std::printf("runtime_prog: guard: synchronize returned %s\n", cudaGetErrorName(e));
        return e == cudaSuccess ? 0 : 1;
    } else if (!std::strcmp(m, "devbp")) {
        unsigned char *q = nullptr;
        CK(cudaMalloc(&q, 4096));
        CK(cudaMalloc(&p, N));
        devbp_kernel<<<blocks(N + 1), 256>>>(p, N);
        CK(cudaDeviceSynchronize());
        CK(cudaFree(p));
        CK(cudaFree(q));
    } else if (!std::strcmp(m, "workload")) {
        long steps = argc > 2 ? std::atol(argv[2]) : 200, per = argc > 3 ? std::atol(argv[3]) : 20;
        unsigned char **bufs = new unsigned char *[per];
        CK(cudaFree(nullptr)); // the runtime's start-up, outside the timed part
        auto t0 = std::chrono::steady_clock::now();
        for (long st = 0; st < steps; st++) {
            for (long i = 0; i < per; i++)
                CK(cudaMalloc(&bufs[i], 256 + 64 * ((st + i) % 16)));
            touch<<<1, 256>>>(bufs[0], 256, 0);
            touch<<<1, 256>>>(bufs[per - 1], 256, 0);
            CK(cudaDeviceSynchronize());
            for (long i = 0; i < per; i++)
                CK(cudaFree(bufs[i]));
        }
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        delete[] bufs;
        std::printf("runtime_prog: workload %ld steps x %ld allocations done in %.3f ms\n", steps, per, ms);
    } else {
        std::fprintf(stderr, "usage: runtime_prog malloc|async|managed|pitch|graph|nosync|clean|readpast|guard|"
                             "devbp|workload STEPS PER_STEP\n");
        return 2;
    }
    std::printf("runtime_prog: %s done\n", m);
    return 0;
}
