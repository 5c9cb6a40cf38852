/* alloc4.c: an allocation-heavy program of four threads, for measuring
 * what heaptrack costs: each thread makes N allocations of 16 to 520
 * bytes from four call sites, keeps the last 1,024 in a ring and frees the
 * one it replaces. Usage: alloc4 N (per thread; 2500000 makes 10 million) */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define RING 1024

static long per_thread;

__attribute__((noinline)) void *site_a(size_t n) { return malloc(n); }
__attribute__((noinline)) void *site_b(size_t n) { return calloc(1, n); }
__attribute__((noinline)) void *site_c(size_t n) { return malloc(n + 8); }
__attribute__((noinline)) void *site_d(size_t n) { return malloc(n * 2); }

static void *worker(void *arg)
{
	void *ring[RING] = {0};
	unsigned seed = (unsigned)(long)arg;
	for (long i = 0; i < per_thread; i++) {
		size_t n = 16 + ((i * 7 + seed) % 64) * 4;
		void *p;
		switch (i & 3) {
		case 0: p = site_a(n); break;
		case 1: p = site_b(n); break;
		case 2: p = site_c(n); break;
		default: p = site_d(n); break;
		}
		memset(p, 1, 8);
		free(ring[i % RING]);
		ring[i % RING] = p;
	}
	for (int i = 0; i < RING; i++)
		free(ring[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[THREADS];
	per_thread = argc > 1 ? atol(argv[1]) : 1000000;
	for (long t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, worker, (void *)t);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	return 0;
}
