/* churn.c: three threads allocate without pause while main stops at
 * check() every few milliseconds. Thread t keeps every block of 16 + t
 * bytes it gets from churn_alloc in its own array and counts it after the
 * store: at a stop, thread t holds counts[t] blocks, or counts[t] + 1 when
 * it stopped inside malloc or before the count. Every other block it
 * allocates in churn_temp is freed at once.
 * Usage: churn CHECKS */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define THREADS 3
#define MAX (1 << 20)

volatile long counts[THREADS];
static void **kept[THREADS];
static volatile int done;

__attribute__((noinline)) void *churn_alloc(int t) { return malloc(16 + t); }
__attribute__((noinline)) void churn_temp(void) { free(malloc(100)); }

static void *worker(void *arg)
{
	int t = (int)(long)arg;
	while (!done && counts[t] < MAX) {
		kept[t][counts[t]] = churn_alloc(t);
		counts[t] = counts[t] + 1;
		churn_temp();
	}
	return NULL;
}

__attribute__((noinline)) void check(int i) { (void)i; }

int main(int argc, char **argv)
{
	pthread_t th[THREADS];
	int checks = argc > 1 ? atoi(argv[1]) : 5;
	for (long t = 0; t < THREADS; t++)
		kept[t] = calloc(MAX, sizeof(void *));
	for (long t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, worker, (void *)t);
	for (int i = 0; i < checks; i++) {
		usleep(20000);
		check(i);
	}
	done = 1;
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	return 0;
}
