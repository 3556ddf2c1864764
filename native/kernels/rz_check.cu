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

/*
 * Launch checks (METRALE_REDZONE_SCAN=launch, native/src/device/check_changed.c): the same comparison, and
 * each band that differs is copied into the result area, so one small copy brings back every changed band
 * (up to cap bands and bytecap bytes; the rest are seen by a later check). The area's counters are never
 * reset: base_count and base_bytes are their values after the area's previous check, so a check needs no
 * clearing before it. Area: out[0] bands found (counter), out[1] bytes used (counter), then cap entries
 * (position in descs, offset of its bytes in the data, 0xffffffff when they did not fit), then the data.
 */
extern "C" __global__ void rz_check_changed(const rz_check_desc *descs, unsigned int n, unsigned int *out,
                                            unsigned int cap, unsigned int bytecap, unsigned int base_count,
                                            unsigned int base_bytes)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const rz_check_desc d = descs[i];
    const unsigned char *p = (const unsigned char *)d.band;
    unsigned int bad = 0;
    for (unsigned int b = 0; b < d.bytes; b++)
        bad |= p[b] ^ d.expected;
    if (!bad)
        return;
    unsigned int k = atomicAdd(out, 1u) - base_count;
    if (k >= cap)
        return;
    unsigned int off = atomicAdd(out + 1, d.bytes) - base_bytes;
    unsigned char *data = (unsigned char *)(out + 2 + 2 * cap);
    out[2 + 2 * k] = i;
    if (off <= bytecap && d.bytes <= bytecap - off) {
        for (unsigned int b = 0; b < d.bytes; b++)
            data[off + b] = p[b];
        out[3 + 2 * k] = off;
    } else {
        out[3 + 2 * k] = 0xffffffffu;
    }
}
