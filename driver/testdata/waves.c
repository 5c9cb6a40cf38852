/* waves.c: requests served in waves of short-lived threads, for the tests
 * of what a snapshot records (valgrind.blocks).
 *
 * Each wave starts four threads, each serving three requests, and joins
 * them; then main calls checkpoint. A request keeps one 24-byte record
 * (new_record) and allocates and frees a 500-byte buffer (scratch), so
 * between two checkpoints the heap grows by 12 records, 288 bytes, at
 * new_record, and scratch holds nothing. The number of waves is argv[1]
 * (default 4). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define REQUESTS 3

static void *kept[1024];
static int nkept;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void *new_record(void)
{
	return calloc(1, 24); /* leak: 24 bytes per request */
}

static void scratch(int i)
{
	char *p = malloc(500); /* freed at once */
	memset(p, i, 500);
	free(p);
}

static void *serve(void *arg)
{
	for (int i = 0; i < REQUESTS; i++) {
		scratch(i);
		void *r = new_record();
		pthread_mutex_lock(&mu);
		kept[nkept++ % 1024] = r;
		pthread_mutex_unlock(&mu);
	}
	return arg;
}

void checkpoint(int wave)
{
	(void)wave;
}

int main(int argc, char **argv)
{
	int waves = argc > 1 ? atoi(argv[1]) : 4;
	for (int w = 0; w < waves; w++) {
		pthread_t t[THREADS];
		for (int i = 0; i < THREADS; i++)
			pthread_create(&t[i], NULL, serve, NULL);
		for (int i = 0; i < THREADS; i++)
			pthread_join(t[i], NULL);
		checkpoint(w);
	}
	return 0;
}
