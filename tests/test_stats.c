/* The mapping counters, porting the seed's five recorder tests (mnemosyne recorders.rs). */
#include "rz_test.h"

static rz_stats_t snap(void) {
    rz_stats_t s;
    cr_assert_eq(rz_stats_get(&s), RZ_OK);
    return s;
}

Test(stats, mapping_tracks_deltas_and_peak) {
    rz_stats_t before = snap();
    rz__record_map(4096);
    rz_stats_t during = snap();
    cr_assert_eq(during.current_mapped_bytes, before.current_mapped_bytes + 4096);
    cr_assert_eq(during.map_calls, before.map_calls + 1);
    cr_assert_eq(during.unmap_calls, before.unmap_calls);
    cr_assert_geq(during.peak_mapped_bytes, during.current_mapped_bytes);
    cr_assert_geq(during.peak_mapped_bytes, before.peak_mapped_bytes);
    rz__record_unmap(4096);
    rz_stats_t after = snap();
    cr_assert_eq(after.current_mapped_bytes, before.current_mapped_bytes);
    cr_assert_eq(after.map_calls, before.map_calls + 1);
    cr_assert_eq(after.unmap_calls, before.unmap_calls + 1);
    cr_assert_geq(after.peak_mapped_bytes, during.peak_mapped_bytes, "peak regressed");
    cr_assert_eq(after.peak_mapped_bytes, before.current_mapped_bytes + 4096);
}

Test(stats, failed_release_counts_call_without_bytes) {
    rz_stats_t before = snap();
    rz__record_map(4096);
    rz_stats_t mapped = snap();
    cr_assert_eq(mapped.current_mapped_bytes, before.current_mapped_bytes + 4096);
    rz__record_unmap_failure();
    rz_stats_t failed = snap();
    cr_assert_eq(failed.current_mapped_bytes, mapped.current_mapped_bytes);
    cr_assert_eq(failed.unmap_calls, mapped.unmap_calls + 1);
    cr_assert_eq(failed.map_calls, mapped.map_calls);
    rz__record_unmap(4096);
    cr_assert_eq(snap().current_mapped_bytes, before.current_mapped_bytes);
}

Test(stats, page_reset_counts_calls_and_bytes_only) {
    rz_stats_t before = snap();
    rz__record_page_reset(8192);
    rz_stats_t after = snap();
    cr_assert_eq(after.page_reset_calls, before.page_reset_calls + 1);
    cr_assert_eq(after.page_reset_bytes, before.page_reset_bytes + 8192);
    cr_assert_eq(after.current_mapped_bytes, before.current_mapped_bytes);
    cr_assert_eq(after.unmap_calls, before.unmap_calls);
}

Test(stats, decommit_counts_calls_and_bytes_only) {
    rz_stats_t before = snap();
    rz__record_decommit(65536);
    rz_stats_t after = snap();
    cr_assert_eq(after.decommit_calls, before.decommit_calls + 1);
    cr_assert_eq(after.decommit_bytes, before.decommit_bytes + 65536);
    cr_assert_eq(after.current_mapped_bytes, before.current_mapped_bytes);
    cr_assert_eq(after.unmap_calls, before.unmap_calls);
    cr_assert_eq(after.page_reset_calls, before.page_reset_calls);
}

Test(stats, guard_install_counts_calls_and_bytes_only) {
    rz_stats_t before = snap();
    rz__record_guard_install(4096);
    rz_stats_t after = snap();
    cr_assert_eq(after.guard_install_calls, before.guard_install_calls + 1);
    cr_assert_eq(after.guard_install_bytes, before.guard_install_bytes + 4096);
    cr_assert_eq(after.current_mapped_bytes, before.current_mapped_bytes);
    cr_assert_eq(after.page_reset_calls, before.page_reset_calls);
    cr_assert_eq(after.unmap_calls, before.unmap_calls);
}

Test(stats, peak_never_regresses_under_concurrent_maps) {
    rz__record_map(100);
    rz__record_map(50);
    rz__record_unmap(100);
    rz__record_map(20);
    rz_stats_t s = snap();
    cr_assert_eq(s.current_mapped_bytes, 70);
    cr_assert_eq(s.peak_mapped_bytes, 150);
}

Test(stats, null_snapshot_is_einval) { cr_assert_eq(rz_stats_get(NULL), RZ_EINVAL); }
