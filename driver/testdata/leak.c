/* leak.c: a single-threaded program that leaks a known number of bytes per
 * call of handle_request, for snapctl's driver tests.
 *
 * handle_request(i) allocates 100 bytes it frees and 16 bytes it keeps, so
 * between two consecutive hits of a breakpoint on handle_request the heap
 * grows by exactly 16 bytes at leak.c:keep's malloc line. */
#include <stdlib.h>
#include <string.h>

static void **kept;
static int nkept;

static void *keep(size_t n)
{
	void *p = malloc(n); /* the leak site */
	memset(p, 1, n);
	kept[nkept++] = p;
	return p;
}

int handle_request(int i)
{
	char *tmp = malloc(100);
	memset(tmp, i, 100);
	keep(16);
	free(tmp);
	return i;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 5;
	kept = calloc(n, sizeof *kept);
	for (int i = 0; i < n; i++)
		handle_request(i);
	return 0;
}
