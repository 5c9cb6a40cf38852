// A corrupted heap: the link of a freed 24-byte chunk in glibc's fastbin
// is overwritten after the free, so that walking the bins (mallinfo2)
// follows a wild pointer. The program allocates nothing of that size
// again, and exits normally.
#include <stdlib.h>
#include <string.h>

void round_done(void) {}

int main(void) {
	void *p[8];
	for (int i = 0; i < 8; i++)
		p[i] = malloc(24);
	// Seven go to the thread's cache, the eighth to a fastbin.
	for (int i = 0; i < 8; i++)
		free(p[i]);
	memset(p[7], 0x41, 8);
	round_done();
	return 0;
}
