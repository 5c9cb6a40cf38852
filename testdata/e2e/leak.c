// leak.c: a single-threaded request loop that leaks 24 bytes per request.
//
// Every call of handle_request allocates a 24-byte record and keeps it in a
// global table that nothing ever frees, so between two consecutive hits of a
// breakpoint on handle_request the heap grows by exactly 24 bytes, all of it
// at the malloc line below. The number of requests is argv[1] (default 5).
// Nothing is printed inside the loop, so stdio's buffer does not show up as
// growth.
#include <stdlib.h>

struct record {
	int id;
	char payload[20];
};

static struct record *kept[1024];

void handle_request(int id)
{
	struct record *r = malloc(sizeof *r); // the leak: 24 bytes per request
	r->id = id;
	kept[id % 1024] = r;
}

// flush_cache is never called: a breakpoint on it never hits.
void flush_cache(void)
{
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 5;
	for (int i = 0; i < n; i++)
		handle_request(i);
	return 0;
}
