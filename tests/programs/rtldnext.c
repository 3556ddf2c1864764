/*
 * dlsym(RTLD_NEXT, ...) called from a library must be answered for that library, also when libredzone.so
 * (which interposes dlsym) is preloaded: an interposer asking for the next definition of a function it
 * defines itself must not get its own back (it would recurse). Built three times:
 *   RZNEXT_FIRST   librznext_first.so: rznext_probe() = 1, and rznext_call_next(), which calls the next one
 *   RZNEXT_SECOND  librznext_second.so: rznext_probe() = 2, loaded after the first
 *   (neither)      rtldnext: linked against both, in that order; exits 0 when the next definition was found
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#if defined(RZNEXT_FIRST)
__attribute__((visibility("default"))) int rznext_probe(void);
__attribute__((visibility("default"))) int rznext_call_next(void);
int rznext_probe(void) { return 1; }
int rznext_call_next(void) {
    int (*next)(void) = (int (*)(void))dlsym(RTLD_NEXT, "rznext_probe");
    if (next == NULL)
        return -1;
    if (next == rznext_probe)
        return -2; /* its own definition: a wrapper calling it would recurse */
    return next();
}
#elif defined(RZNEXT_SECOND)
__attribute__((visibility("default"))) int rznext_probe(void);
__attribute__((visibility("default"))) int rznext_second_loaded(void);
int rznext_probe(void) { return 2; }
int rznext_second_loaded(void) { return 1; } /* used by the program, so the linker keeps this library */
#else
int rznext_call_next(void);
int rznext_second_loaded(void);
int main(void) {
    if (!rznext_second_loaded())
        return 1;
    int v = rznext_call_next();
    if (v != 2) {
        printf("rtldnext: FAIL: dlsym(RTLD_NEXT, \"rznext_probe\") from librznext_first.so gave %s\n",
               v == -2 ? "its own definition" : v == -1 ? "NULL" : "an unexpected definition");
        return 1;
    }
    printf("rtldnext: RTLD_NEXT from a library found the next definition\n");
    return 0;
}
#endif
