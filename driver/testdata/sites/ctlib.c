/* ctlib.c: a C library that threads.py loads through ctypes (dlopen) and
 * calls from four Python threads. Per call:
 *   keep_record: malloc(1000), kept          -> 1 block, 1,000 bytes
 *   use_scratch: malloc(1000), freed at once  -> nothing
 * round_done(r) is called by Python's main thread after round r (0-based)
 * has ended, with every worker waiting at a barrier, so a stop there sees
 * 4 blocks and 4,000 bytes more per round, all at keep_record. */
#include <stdlib.h>
#include <string.h>

static void *volatile sink;

__attribute__((noinline)) void keep_record(int id)
{
	char *p = malloc(1000); /* the leak */
	memset(p, id, 1000);
	sink = p;
}

__attribute__((noinline)) void use_scratch(int id)
{
	char *p = malloc(1000);
	memset(p, id, 1000);
	sink = p;
	free(p);
}

__attribute__((noinline)) void round_done(int r) { sink = (void *)(long)r; }
