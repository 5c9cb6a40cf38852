// counts.c: tick(i) is called for i = 0, 1, ..., argv[1]-1 (default 20) and
// keeps i+1 bytes each time, so the heap at the entry of tick(i) is exactly
// i*(i+1)/2 bytes: a stop's heap_bytes tells which call it stopped in. That
// makes conditions, skip counts, every and max_hits checkable from run.json.
#include <stdlib.h>

static char *kept[1024];

void tick(int i)
{
	kept[i % 1024] = malloc(i + 1); // i+1 bytes per call
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20;
	for (int i = 0; i < n; i++)
		tick(i);
	return 0;
}
