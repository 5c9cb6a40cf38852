/* churn.c: a small leak beside a large churn, for report.html's growth
 * graphs.
 *
 * main fills a cache of 384 blocks of 4 KiB (1.5 MiB) before the first
 * request and frees it after the fourth; every call of handle_request
 * keeps 300 bytes (churn.c:keep). argv[1] requests, default 8. */
#include <stdlib.h>
#include <string.h>

static char *cache[384];
static char *kept[1024];
static int nkept;

static void keep(void)
{
	kept[nkept] = malloc(300); /* the leak */
	memset(kept[nkept++], 1, 300);
}

int handle_request(int i)
{
	keep();
	return i;
}

static void fill_cache(void)
{
	for (int i = 0; i < 384; i++) {
		cache[i] = malloc(4096); /* the churn */
		memset(cache[i], 2, 4096);
	}
}

static void drop_cache(void)
{
	for (int i = 0; i < 384; i++)
		free(cache[i]);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 8;
	fill_cache();
	for (int i = 1; i <= n; i++) {
		handle_request(i);
		if (i == 4)
			drop_cache();
	}
	return 0;
}
