/* ticker.c: allocates 10 blocks of exactly 2000 bytes in tick, sleeping
 * 20 ms between them, so that heaptrack's time-based snapshots see the heap
 * grow. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *kept[10];

void *tick(int i)
{
	void *p = malloc(2000);
	memset(p, i, 2000);
	return p;
}

int main(void)
{
	for (int i = 0; i < 10; i++) {
		kept[i] = tick(i);
		usleep(20000);
	}
	return 0;
}
