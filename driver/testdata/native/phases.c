/* phases.c: ROUNDS requests in three phases: chunk (three a request)
 * allocates 4,000 bytes and frees them, final keeps 2,000 bytes (the
 * leak: a 2,016-byte chunk in glibc's heap), conn_end allocates and
 * frees 10 bytes. Usage: phases ROUNDS */
#include <stdlib.h>
#include <string.h>

static void *volatile sink;
static void *kept[100000];
static int nkept;

__attribute__((noinline)) void chunk(int i) { void *p = malloc(4000); memset(p, i, 4000); free(p); }
__attribute__((noinline)) void final(int i) { kept[nkept++] = malloc(2000); (void)i; }
__attribute__((noinline)) void conn_end(int i) { sink = malloc(10); free(sink); (void)i; }

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 6;
	for (int r = 0; r < n; r++) {
		for (int c = 0; c < 3; c++)
			chunk(c);
		final(r);
		conn_end(r);
	}
	return 0;
}
