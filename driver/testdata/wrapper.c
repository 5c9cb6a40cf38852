/* wrapper.c: allocations through a wrapper with several callers, for the
 * tests of wrapper detection and per-hit figures.
 *
 * Every allocation goes through xalloc. Each call of handle_request keeps
 * one 48-byte session (add_session) and one 16-byte token (add_token),
 * and allocates and frees a 1000-byte scratch buffer: the leaks are the
 * two callers of xalloc, not xalloc. */
#include <stdlib.h>
#include <string.h>

static void **kept;
static int nkept;

void *xalloc(size_t n)
{
	void *p = malloc(n); /* the wrapper's only allocation */
	memset(p, 0, n);
	return p;
}

static void add_session(void)
{
	kept[nkept++] = xalloc(48); /* leak: session */
}

static void add_token(void)
{
	kept[nkept++] = xalloc(16); /* leak: token */
}

static void scratch(int i)
{
	char *p = xalloc(1000); /* freed */
	memset(p, i, 1000);
	free(p);
}

int handle_request(int i)
{
	scratch(i);
	add_session();
	add_token();
	return i;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 5;
	kept = calloc(2 * n, sizeof *kept);
	for (int i = 0; i < n; i++)
		handle_request(i);
	return 0;
}
