// fixcheck.c: a request loop whose leaks a fix removes, keeps or adds, for
// `snapctl compare`. Built three ways:
//
//   (no flag)   remember() leaks 24 bytes per request, audit() 40.
//   -DPARTIAL   remember() frees its block; audit() still leaks 40, from a
//               malloc two lines lower (the "fix" moved its code); and
//               handle_request() leaks 16 bytes per request of its own.
//   -DFIXED     nothing leaks.
//
// The number of requests is argv[1] (default 5).
#include <stdlib.h>

static void *kept[4096];
static int nkept;

static void remember(int id)
{
	char *p = malloc(24); // remember: 24 bytes per request
	p[0] = (char)id;
#if defined(FIXED) || defined(PARTIAL)
	free(p);
#else
	kept[nkept++] = p;
#endif
}

static void audit(int id)
{
#ifndef PARTIAL
	void *q = malloc(40); // audit: 40 bytes per request
#else
	int pad = id;
	(void)pad;
	void *q = malloc(40); // audit, moved by the partial fix: 40 bytes per request
#endif
#ifdef FIXED
	free(q);
#else
	kept[nkept++] = q;
#endif
}

void handle_request(int id)
{
	remember(id);
	audit(id);
#ifdef PARTIAL
	kept[nkept++] = malloc(16); // new in the partial fix: 16 bytes per request
#endif
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 5;
	if (n > 1000)
		n = 1000;
	for (int i = 0; i < n; i++)
		handle_request(i);
	return 0;
}

#ifdef NO_STATS
// Linked with jemalloc: a mallctl that answers ENOENT to every name, as a
// jemalloc built without statistics answers "stats.allocated", so that
// snapctl cannot read the heap.
#include <errno.h>
#include <stddef.h>
int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
{
	(void)name, (void)oldp, (void)oldlenp, (void)newp, (void)newlen;
	return ENOENT;
}
#endif
