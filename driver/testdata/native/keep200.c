// Keeps 200 bytes a request (keep, line 12) and frees a scratch block of
// 1,000; request_done is called after each request. argv[1] is the
// number of requests (20), argv[2] microseconds to sleep after each (0).
// Linked with -ljemalloc it allocates with jemalloc.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void request_done(int r) { (void)r; }

static void *keep(size_t n) {
	char *p = malloc(n);
	memset(p, 1, n);
	return p;
}

int main(int argc, char **argv) {
	int requests = argc > 1 ? atoi(argv[1]) : 20;
	int pause = argc > 2 ? atoi(argv[2]) : 0;
	for (int r = 0; r < requests; r++) {
		char *tmp = malloc(1000);
		memset(tmp, 2, 1000);
		free(tmp);
		keep(200);
		request_done(r);
		if (pause)
			usleep(pause);
	}
	return 0;
}
