// Four worker threads serve each request: each allocates and frees
// scratch blocks (1,000 B, then 100 KiB), and worker 0 keeps 200 B a
// request (keep, line 29), which jemalloc serves from its 224 B size
// class. The workers then wait for the next request while main calls
// request_done(r). argv[1] is the number of requests (20), argv[2] the
// bytes worker 0 keeps (200; 0 for none).
// Linked with -ljemalloc it allocates with jemalloc; built with
// -DNO_STATS its mallctl answers ENOENT to every name, as a jemalloc
// built without statistics (--disable-stats) answers "stats.allocated".
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define WORKERS 4

void request_done(int r) { (void)r; }

#ifdef NO_STATS
int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	(void)name, (void)oldp, (void)oldlenp, (void)newp, (void)newlen;
	return ENOENT;
}
#endif

static size_t kept = 200;

static void *keep(size_t n) {
	char *p = malloc(n);
	memset(p, 1, n);
	return p;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go = PTHREAD_COND_INITIALIZER, done = PTHREAD_COND_INITIALIZER;
static int round_no, finished, quit;

static void *worker(void *arg) {
	long id = (long)arg;
	int seen = 0;
	for (;;) {
		pthread_mutex_lock(&mu);
		while (round_no == seen && !quit)
			pthread_cond_wait(&go, &mu);
		if (quit) {
			pthread_mutex_unlock(&mu);
			return NULL;
		}
		seen = round_no;
		pthread_mutex_unlock(&mu);
		char *a = malloc(1000);
		memset(a, 2, 1000);
		char *b = malloc(100 * 1024);
		memset(b, 3, 100 * 1024);
		free(b);
		free(a);
		if (id == 0 && kept)
			keep(kept);
		pthread_mutex_lock(&mu);
		finished++;
		pthread_cond_signal(&done);
		pthread_mutex_unlock(&mu);
	}
}

int main(int argc, char **argv) {
	int requests = argc > 1 ? atoi(argv[1]) : 20;
	if (argc > 2)
		kept = (size_t)atol(argv[2]);
	pthread_t t[WORKERS];
	for (long i = 0; i < WORKERS; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int r = 0; r < requests; r++) {
		pthread_mutex_lock(&mu);
		finished = 0;
		round_no++;
		pthread_cond_broadcast(&go);
		while (finished < WORKERS)
			pthread_cond_wait(&done, &mu);
		pthread_mutex_unlock(&mu);
		request_done(r);
	}
	pthread_mutex_lock(&mu);
	quit = 1;
	pthread_cond_broadcast(&go);
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(t[i], NULL);
	return 0;
}
