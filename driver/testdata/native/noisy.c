// A 4-thread service whose requests each hold a scratch working set of
// 16 to 512 KiB (blocks of 4 KiB, freed at the request's end) and which
// keeps 64 KiB (planted, line 39) on every 10th request: 6.4 KiB a
// request. request_done is called after each request, by whichever
// worker served it: at each stop the other workers are in the middle of
// theirs, holding their scratch. argv[1] is the requests to serve in
// all (200); argv[2] and argv[3], when given, plant argv[3] bytes every
// argv[2]-th request instead.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void request_done(int n) { (void)n; }

static int requests = 200, served, every = 10, planted = 64 << 10;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *kept[1 << 16];

static unsigned next(unsigned *x) { return *x = *x * 1103515245 + 12345; }

static void *worker(void *arg) {
	unsigned x = (unsigned)(long)arg;
	void *scratch[128];
	for (;;) {
		pthread_mutex_lock(&mu);
		int n = served < requests ? served++ : -1;
		pthread_mutex_unlock(&mu);
		if (n < 0)
			return NULL;
		int blocks = 4 + (next(&x) >> 16) % 125;
		for (int i = 0; i < blocks; i++) {
			scratch[i] = malloc(4096);
			memset(scratch[i], i, 4096);
		}
		// The request's work: 1 to 4 ms with its scratch held.
		usleep(1000 + (next(&x) >> 16) % 3000);
		if (n % every == every - 1) {
			kept[n] = malloc(planted);
			memset(kept[n], 1, planted);
		}
		for (int i = 0; i < blocks; i++)
			free(scratch[i]);
		request_done(n);
	}
}

int main(int argc, char **argv) {
	if (argc > 1)
		requests = atoi(argv[1]);
	if (argc > 3) {
		every = atoi(argv[2]);
		planted = atoi(argv[3]);
	}
	pthread_t t[4];
	for (long i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, worker, (void *)(i + 1));
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	return 0;
}
