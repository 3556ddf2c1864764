/*
 * The pure parts of the copy and memset range check (native/src/policy/bounds.c): the extent one side of a pitched
 * copy touches (CUDA_MEMCPY2D/3D descriptors, cuMemsetD2D*), which part of a range lies outside the
 * program's buffer, and the report line. The check end to end, on the emulated driver (2D and 3D copies
 * included), is test_transparency.c.
 */
#include <stdint.h>

#include "rz_test.h"

/* A brute-force model: the bytes a pitched copy touches, row by row. */
static void model(uint64_t base, uint64_t x, uint64_t y, uint64_t z, uint64_t pitch, uint64_t layer_rows,
                  uint64_t width, uint64_t height, uint64_t depth, uint64_t *lo, uint64_t *hi) {
    *lo = UINT64_MAX;
    *hi = 0;
    for (uint64_t d = 0; d < depth; d++)
        for (uint64_t r = 0; r < height; r++) {
            uint64_t first = base + ((z + d) * layer_rows + y + r) * pitch + x;
            *lo = first < *lo ? first : *lo;
            *hi = first + width > *hi ? first + width : *hi;
        }
}

Test(bounds, pitched_extent_matches_a_row_by_row_model) {
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 20000; i++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        uint64_t width = 1 + seed % 64, pitch = width + (seed >> 8) % 32, height = 1 + (seed >> 16) % 6;
        uint64_t depth = 1 + (seed >> 20) % 4, layer_rows = height + (seed >> 24) % 3;
        uint64_t x = (seed >> 28) % 16, y = (seed >> 32) % 5, z = (seed >> 36) % 3, base = 0x10000 + (seed >> 40) % 4096;
        uint64_t start, bytes, lo, hi;
        cr_assert(rz__pitched_extent(base, x, y, z, pitch, layer_rows, width, height, depth, &start, &bytes));
        model(base, x, y, z, pitch, layer_rows, width, height, depth, &lo, &hi);
        cr_assert_eq(start, lo, "case %d: start", i);
        cr_assert_eq(start + bytes, hi, "case %d: end", i);
    }
}

Test(bounds, pitched_extent_edge_cases) {
    uint64_t start = 0, bytes = 0;
    /* one row: the pitch does not matter (not even a short one) */
    cr_assert(rz__pitched_extent(1000, 4, 0, 0, 0, 0, 10, 1, 1, &start, &bytes));
    cr_assert_eq(start, 1004);
    cr_assert_eq(bytes, 10);
    /* 3 rows of 10 bytes, 100 apart, from row 2: rows 2, 3, 4 */
    cr_assert(rz__pitched_extent(1000, 0, 2, 0, 100, 0, 10, 3, 1, &start, &bytes));
    cr_assert_eq(start, 1200);
    cr_assert_eq(bytes, 210);
    /* 2 layers of 4 rows (3 copied), pitch 16, from layer 1: rows 4..6 and 8..10 */
    cr_assert(rz__pitched_extent(0, 0, 0, 1, 16, 4, 8, 3, 2, &start, &bytes));
    cr_assert_eq(start, 64);
    cr_assert_eq(bytes, 6 * 16 + 8);
    /* nothing touched */
    cr_assert_not(rz__pitched_extent(1000, 0, 0, 0, 100, 0, 0, 3, 1, &start, &bytes));
    cr_assert_not(rz__pitched_extent(1000, 0, 0, 0, 100, 0, 10, 0, 1, &start, &bytes));
    cr_assert_not(rz__pitched_extent(1000, 0, 0, 0, 100, 4, 10, 3, 0, &start, &bytes));
    /* what the driver refuses by itself: overlapping rows or layers, arithmetic that overflows */
    cr_assert_not(rz__pitched_extent(1000, 0, 0, 0, 8, 0, 10, 2, 1, &start, &bytes));
    cr_assert_not(rz__pitched_extent(1000, 0, 0, 0, 16, 2, 10, 3, 2, &start, &bytes));
    cr_assert_not(rz__pitched_extent(UINT64_MAX - 5, 0, 0, 0, 16, 0, 10, 1, 1, &start, &bytes));
    cr_assert_not(rz__pitched_extent(0, 0, UINT64_MAX / 2, 0, 16, 0, 10, 1, 1, &start, &bytes));
    cr_assert_not(rz__pitched_extent(0, 0, 0, 0, UINT64_MAX / 2, 0, 10, 4, 1, &start, &bytes));
    /* the last byte of the address space is fine */
    cr_assert(rz__pitched_extent(UINT64_MAX - 9, 0, 0, 0, 16, 0, 10, 1, 1, &start, &bytes));
    cr_assert_eq(bytes, 10);
}

Test(bounds, memcpy2d_sides) {
    rzcu_memcpy2d d = {.srcXInBytes = 8, .srcY = 1, .srcMemoryType = RZCU_MEMORYTYPE_DEVICE, .srcDevice = 0x1000,
                       .srcPitch = 256, .dstMemoryType = RZCU_MEMORYTYPE_HOST, .dstHost = &d, .dstPitch = 100,
                       .WidthInBytes = 100, .Height = 4};
    uint64_t start, bytes;
    cr_assert(rz__memcpy2d_extent(&d, 0, &start, &bytes));
    cr_assert_eq(start, 0x1000 + 256 + 8);
    cr_assert_eq(bytes, 3 * 256 + 100);
    cr_assert_not(rz__memcpy2d_extent(&d, 1, &start, &bytes), "host memory is not checked");
    d.dstMemoryType = RZCU_MEMORYTYPE_UNIFIED;
    d.dstDevice = 0x9000;
    cr_assert(rz__memcpy2d_extent(&d, 1, &start, &bytes), "a unified side is a device address");
    cr_assert_eq(start, 0x9000);
    cr_assert_eq(bytes, 3 * 100 + 100);
    d.srcMemoryType = RZCU_MEMORYTYPE_ARRAY;
    cr_assert_not(rz__memcpy2d_extent(&d, 0, &start, &bytes), "arrays are the driver's");
}

Test(bounds, memcpy3d_sides) {
    rzcu_memcpy3d d = {.srcMemoryType = RZCU_MEMORYTYPE_HOST,
                       .dstXInBytes = 4, .dstY = 1, .dstZ = 2, .dstMemoryType = RZCU_MEMORYTYPE_DEVICE,
                       .dstDevice = 0x100000, .dstPitch = 64, .dstHeight = 8,
                       .WidthInBytes = 32, .Height = 5, .Depth = 3};
    uint64_t start, bytes;
    cr_assert_not(rz__memcpy3d_extent(&d, 0, &start, &bytes));
    cr_assert(rz__memcpy3d_extent(&d, 1, &start, &bytes));
    cr_assert_eq(start, 0x100000 + (2 * 8 + 1) * 64 + 4);
    cr_assert_eq(bytes, (2 * 8 + 4) * 64 + 32);
    /* one layer: its height may be 0 (as the driver allows) */
    d.Depth = 1;
    d.dstZ = 0;
    d.dstHeight = 0;
    cr_assert(rz__memcpy3d_extent(&d, 1, &start, &bytes));
    cr_assert_eq(start, 0x100000 + 64 + 4);
    cr_assert_eq(bytes, 4 * 64 + 32);
}

Test(bounds, outside_user_range) {
    int64_t first, last;
    cr_assert_not(rz__outside_user_range(1000, 100, 1000, 100, &first, &last), "the whole buffer");
    cr_assert_not(rz__outside_user_range(1000, 100, 1099, 1, &first, &last), "its last byte");
    cr_assert_not(rz__outside_user_range(1000, 100, 1050, 0, &first, &last), "nothing");
    cr_assert(rz__outside_user_range(1000, 100, 1000, 108, &first, &last));
    cr_assert(first == 0 && last == 7, "[%lld..=%lld]", (long long)first, (long long)last);
    cr_assert(rz__outside_user_range(1000, 100, 1099, 2, &first, &last));
    cr_assert(first == 0 && last == 0, "[%lld..=%lld]", (long long)first, (long long)last);
    cr_assert(rz__outside_user_range(1000, 100, 1100, 8, &first, &last), "starts in the band");
    cr_assert(first == 0 && last == 7, "[%lld..=%lld]", (long long)first, (long long)last);
    cr_assert(rz__outside_user_range(1000, 100, 1110, 4, &first, &last));
    cr_assert(first == 10 && last == 13, "[%lld..=%lld]", (long long)first, (long long)last);
    cr_assert(rz__outside_user_range(1000, 100, 960, 8, &first, &last), "before the start");
    cr_assert(first == -40 && last == -33, "[%lld..=%lld]", (long long)first, (long long)last);
    cr_assert(rz__outside_user_range(1000, 100, 992, 20, &first, &last), "from before the start into the buffer");
    cr_assert(first == -8 && last == -1, "[%lld..=%lld]", (long long)first, (long long)last);
}

Test(bounds, report_line) {
    char line[512];
    rz__format_out_of_range(RZ_BOUNDS_WRITE, "cuMemcpyHtoD", 1, 1000, 0, 7, "CUDA_ERROR_INVALID_VALUE", line,
                            sizeof line);
    cr_assert_str_eq(line, "redzone: copy past the end of alloc#1: bytes [0..=7] written by cuMemcpyHtoD "
                           "(user_bytes=1000); nothing copied, CUDA_ERROR_INVALID_VALUE returned as without redzone");
    rz__format_out_of_range(RZ_BOUNDS_READ, "cuMemcpyDtoD", 3, 64, -16, -9, "CUDA_ERROR_INVALID_VALUE", line,
                            sizeof line);
    cr_assert_str_eq(line, "redzone: copy before the start of alloc#3: bytes [-16..=-9] read by cuMemcpyDtoD "
                           "(user_bytes=64); nothing copied, CUDA_ERROR_INVALID_VALUE returned as without redzone");
    rz__format_out_of_range(RZ_BOUNDS_SET, "cuMemsetD2D32", 0, 100, 2, 5, "CUDA_ERROR_INVALID_VALUE", line,
                            sizeof line);
    cr_assert_str_eq(line, "redzone: memset past the end of alloc#0: bytes [2..=5] written by cuMemsetD2D32 "
                           "(user_bytes=100); nothing set, CUDA_ERROR_INVALID_VALUE returned as without redzone");
}

Test(bounds, refusal_record_line) {
    rz_refusal_t r = {.index = 3, .user_bytes = 64, .first = -16, .last = -9, .how = RZ_REFUSED_READ,
                      .result = RZCUDA_ERROR_INVALID_VALUE};
    snprintf(r.entry, sizeof r.entry, "cuMemcpyDtoD");
    char line[512], want[512];
    rz__format_refusal(&r, rz__cu_result_name(r.result), line, sizeof line);
    rz__format_out_of_range(RZ_BOUNDS_READ, "cuMemcpyDtoD", 3, 64, -16, -9, "CUDA_ERROR_INVALID_VALUE", want,
                            sizeof want);
    cr_assert_str_eq(line, want);
    /* A record read from a program: an entry name without its NUL is cut at the field's end, not read past. */
    memset(r.entry, 'x', sizeof r.entry);
    r.how = RZ_REFUSED_SET;
    rz__format_refusal(&r, "CUDA_ERROR_INVALID_VALUE", line, sizeof line);
    char name[sizeof r.entry + 1];
    memset(name, 'x', sizeof r.entry);
    name[sizeof r.entry] = '\0';
    rz__format_out_of_range(RZ_BOUNDS_SET, name, 3, 64, -16, -9, "CUDA_ERROR_INVALID_VALUE", want, sizeof want);
    cr_assert_str_eq(line, want);
    cr_assert_str_eq(rz__cu_result_name(RZCUDA_ERROR_INVALID_VALUE), "CUDA_ERROR_INVALID_VALUE");
    cr_assert_str_eq(rz__cu_result_name(-12345), "CUDA_ERROR_(unknown)");
}
