// around.c: build_reply allocates 100 bytes that it returns and 28 bytes of
// scratch that it frees before returning, so across one call the heap grows
// by exactly 100 bytes. The caller keeps every reply. The number of requests
// is argv[1] (default 4). note is a leaf function: it calls nothing,
// allocates nothing and, like most leaves at -O0, never moves the stack
// pointer.
#include <stdlib.h>
#include <string.h>

static char *replies[1024];
volatile int last_id;

char *build_reply(int id)
{
	char *body = malloc(100);   // kept by the caller
	char *scratch = malloc(28); // freed below
	memset(scratch, id, 28);
	memcpy(body, scratch, 28);
	free(scratch);
	return body;
}

void note(int id)
{
	last_id = id; // note's only line
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4;
	for (int i = 0; i < n; i++) {
		replies[i % 1024] = build_reply(i);
		note(i); // the leaf call
	}
	return 0;
}
