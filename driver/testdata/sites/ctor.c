/* ctor.c: a library whose constructor keeps 40 bytes when loaded
 * (stripped.c loads it with dlopen), and plugin_tick, which it calls
 * once a round. */
#include <stdlib.h>

static void *volatile kept;

__attribute__((constructor)) static void init(void) { kept = malloc(40); /* ctor */ }

__attribute__((noinline)) void plugin_tick(int i) { kept = (void *)(long)(i + 1) == kept ? 0 : kept; }
