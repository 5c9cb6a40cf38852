/* cachewrap.c: allocations through a wrapper with a single caller, for
 * the plan's valgrind.alloc_fns.
 *
 * do_cache_alloc is called from one place only, so snapctl does not find
 * it to be a wrapper by itself: without alloc_fns it is the site. Each
 * call of process_get_command keeps two 50-byte items (the leak) and
 * frees a third. */
#include <stdlib.h>
#include <string.h>

struct cache {
	size_t size;
};

static void **kept;
static int nkept;

void *do_cache_alloc(struct cache *c)
{
	void *p = malloc(c->size);
	memset(p, 0, c->size);
	return p;
}

int process_get_command(struct cache *c, int i)
{
	void *items[3];
	for (int k = 0; k < 3; k++)
		items[k] = do_cache_alloc(c); /* leak: items */
	free(items[i % 3]);
	for (int k = 0; k < 3; k++)
		if (k != i % 3)
			kept[nkept++] = items[k];
	return i;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 5;
	struct cache c = {50};
	kept = calloc(2 * n, sizeof *kept);
	for (int i = 0; i < n; i++)
		process_get_command(&c, i);
	return 0;
}
