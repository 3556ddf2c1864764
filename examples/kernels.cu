// Device code of the driver-API examples. examples/kernels_ptx.h holds its PTX (nvcc -ptx), which the
// examples load with cuModuleLoadData on a GPU; on the emulated driver the same kernel names resolve to the
// host implementations the examples export (CUDA_EMU_KERNEL). Regenerate the header with scripts/gen-ptx.

// Writes `value` into buf[0 .. n + extra): `extra` bytes too many, the bug the examples demonstrate.
extern "C" __global__ void write_past(unsigned char *buf, unsigned long long n, unsigned long long extra,
                                      unsigned int value) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n + extra)
        buf[i] = (unsigned char)value;
}

// Sums buf[0 .. n] inclusive: one element past the end. The result depends on what lies there.
extern "C" __global__ void sum_past(const unsigned char *buf, unsigned long long n, unsigned long long *out) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        unsigned long long s = 0;
        for (unsigned long long i = 0; i <= n; i++)
            s += buf[i];
        *out = s;
    }
}
