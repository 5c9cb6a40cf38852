/* bench/native.sh's target: compute-bound, STOPS calls of checkpoint()
 * spread over about a second of arithmetic, no allocation in the loop.
 * THREADS (argument 3, default 1) counts main: the others allocate a
 * little, each in an arena of its own while there are enough, and then
 * wait for the end, as a server's idle workers do
 * (bench/native-threads.sh). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t over = PTHREAD_COND_INITIALIZER;
static int done;

void checkpoint(int i) { (void)i; }

static void *idle(void *arg) {
	(void)arg;
	void *keep[16];
	for (int i = 0; i < 16; i++)
		keep[i] = malloc(64 + 100 * i);
	for (int i = 0; i < 16; i += 2)
		free(keep[i]);
	pthread_mutex_lock(&mu);
	while (!done)
		pthread_cond_wait(&over, &mu);
	pthread_mutex_unlock(&mu);
	for (int i = 1; i < 16; i += 2)
		free(keep[i]);
	return NULL;
}

int main(int argc, char **argv) {
	int stops = argc > 1 ? atoi(argv[1]) : 100;
	long work = argc > 2 ? atol(argv[2]) : 4000000;
	int threads = argc > 3 ? atoi(argv[3]) : 1;
	pthread_t *t = calloc(threads > 1 ? threads : 1, sizeof *t);
	for (int i = 1; i < threads; i++)
		pthread_create(&t[i], NULL, idle, NULL);
	double x = 0;
	for (int s = 0; s < stops; s++) {
		for (long i = 0; i < work; i++)
			x += (double)(i % 7) * 0.5;
		checkpoint(s);
	}
	pthread_mutex_lock(&mu);
	done = 1;
	pthread_cond_broadcast(&over);
	pthread_mutex_unlock(&mu);
	for (int i = 1; i < threads; i++)
		pthread_join(t[i], NULL);
	printf("%g\n", x);
	return 0;
}
