// churn.c: the allocation-heavy target of bench/xtree.sh. It keeps 64
// blocks of 16 to 271 bytes and replaces one per iteration: argv[1]
// malloc/free pairs (default 2,000,000), nothing else.
#include <stdlib.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2000000;
	void *keep[64] = {0};
	for (int i = 0; i < n; i++) {
		int k = i & 63;
		free(keep[k]);
		keep[k] = malloc(16 + (i & 255));
	}
	for (int k = 0; k < 64; k++)
		free(keep[k]);
	return 0;
}
