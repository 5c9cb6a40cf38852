// Allocator retention (docs/design.md, fact 16): round r allocates
// (r+1) * 2 MiB of 256-byte blocks, frees all of them but the last and
// calls round_done. The freed chunks sit below the live one, so glibc
// cannot give them back at the top of the heap: resident memory grows
// round after round while in-use heap stays put (the last round's kept
// block is freed once the next is allocated).
#include <stdlib.h>
#include <string.h>

void round_done(int r) { (void)r; }

int main(void) {
	void *kept = NULL;
	for (int r = 0; r < 6; r++) {
		int n = (r + 1) * 2 * 1024 * 1024 / 256;
		char **blocks = malloc(n * sizeof *blocks);
		for (int i = 0; i < n; i++) {
			blocks[i] = malloc(256);
			memset(blocks[i], 1, 256);
		}
		free(kept);
		kept = blocks[n - 1];
		for (int i = 0; i < n - 1; i++)
			free(blocks[i]);
		free(blocks);
		round_done(r);
	}
	return kept == NULL;
}
