/*
 * The device-side band check for scans on a GPU: one thread per band compares every byte with the zone's
 * expected byte and, when any differs, appends the band's position in the descriptor array to out[1..cap]
 * (out[0] counts them all, also past cap). Only violated positions come back to the host, so a scan of N
 * clean bands moves 4 bytes instead of N bands.
 *
 * Built to PTX by nvcc at build time (native/CMakeLists.txt) and loaded with cuModuleLoadData on first
 * use in each context; without nvcc, or when loading fails (the emulated driver has no such kernel), scans
 * read the bands with batched copies instead. The descriptor layout is rz_check_desc_t in native/src/device/check_kernel.h.
 */
struct rz_check_desc {
    unsigned long long band; /* device address of the band */
    unsigned int bytes;
    unsigned char expected;
    unsigned char reserved[3];
};

extern "C" __global__ void rz_check_bands(const rz_check_desc *descs, unsigned int n, unsigned int *out,
                                          unsigned int cap)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const rz_check_desc d = descs[i];
    const unsigned char *p = (const unsigned char *)d.band;
    unsigned int bad = 0;
    for (unsigned int b = 0; b < d.bytes; b++)
        bad |= p[b] ^ d.expected;
    if (bad) {
        unsigned int k = atomicAdd(out, 1u);
        if (k < cap)
            out[1 + k] = i;
    }
}
