// A reload that frees most of what it built and calls malloc_trim(0)
// after it, as a server does after a configuration reload: each reload
// allocates 40,000 blocks of 200 bytes and keeps one in 60 (667 blocks,
// 208-byte chunks: 138,736 bytes), so that its pages stay pinned by a
// live block between the free ones. The free heap the allocator holds
// stays about 8 MiB while resident memory grows by more than in-use heap:
// free heap pages that malloc_trim returned are touched again by the
// next reload and pinned. reload_done is called after each reload;
// argv[1] is the reloads (10).
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

void reload_done(int r) { (void)r; }

static void *kept[1 << 16];
static void *built[40000];
static int nkept;

int main(int argc, char **argv) {
	int reloads = argc > 1 ? atoi(argv[1]) : 10;
	for (int r = 0; r < reloads; r++) {
		for (int i = 0; i < 40000; i++) {
			built[i] = malloc(200);
			memset(built[i], 1, 200);
		}
		for (int i = 0; i < 40000; i++) {
			if (i % 60 == 0)
				kept[nkept++] = built[i];
			else
				free(built[i]);
		}
		malloc_trim(0);
		reload_done(r);
	}
	return 0;
}
