/* threads.c: four worker threads, each allocating exactly 1000 bytes per
 * job in worker_alloc and keeping them, 5 jobs each: 20000 bytes live from
 * worker_alloc at exit, plus valgrind-visible thread stacks (TLS). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define JOBS 5

static void *kept[THREADS][JOBS];

void *worker_alloc(int t, int j)
{
	void *p = malloc(1000);
	memset(p, t + j, 1000);
	return p;
}

void *worker(void *arg)
{
	int t = (int)(long)arg;
	for (int j = 0; j < JOBS; j++)
		kept[t][j] = worker_alloc(t, j);
	return NULL;
}

int main(void)
{
	pthread_t th[THREADS];
	for (long t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, worker, (void *)t);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	return 0;
}
