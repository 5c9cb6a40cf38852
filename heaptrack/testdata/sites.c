/* sites.c: four threads that leak blocks of known sizes from known call
 * sites, round after round. After round r (0-based) has ended, main calls
 * round_done(r) with every worker waiting at a barrier, so a stop there
 * sees, per thread t (0..3) and per round:
 *   keep_small: malloc(24 + t), kept          -> 4 blocks, 102 bytes
 *   keep_table: calloc(10, 100), kept          -> 4 blocks, 4,000 bytes
 *   grow_buffer: realloc to (r + 1) * 64, one block per thread, in place of the last
 *   scratch: malloc(1000), freed at once       -> nothing
 * Usage: sites ROUNDS */
#include <pthread.h>
#include <stdlib.h>

#define THREADS 4

static pthread_barrier_t round_end, round_go;
static int rounds;
static void *volatile sink;

__attribute__((noinline)) void *keep_small(int t) { return malloc(24 + t); }
__attribute__((noinline)) void *keep_table(void) { return calloc(10, 100); }
__attribute__((noinline)) void *grow_buffer(void *buf, int r) { return realloc(buf, (r + 1) * 64); }
__attribute__((noinline)) void scratch(void)
{
	char *p = malloc(1000);
	p[0] = 1;
	sink = p;
	free(p);
}

static void *worker(void *arg)
{
	int t = (int)(long)arg;
	void *buf = NULL;
	for (int r = 0; r < rounds; r++) {
		sink = keep_small(t);
		sink = keep_table();
		buf = grow_buffer(buf, r);
		scratch();
		pthread_barrier_wait(&round_end);
		pthread_barrier_wait(&round_go);
	}
	return buf;
}

__attribute__((noinline)) void round_done(int r) { sink = (void *)(long)r; }

int main(int argc, char **argv)
{
	pthread_t th[THREADS];
	rounds = argc > 1 ? atoi(argv[1]) : 3;
	pthread_barrier_init(&round_end, NULL, THREADS + 1);
	pthread_barrier_init(&round_go, NULL, THREADS + 1);
	for (long t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, worker, (void *)t);
	for (int r = 0; r < rounds; r++) {
		pthread_barrier_wait(&round_end);
		round_done(r);
		pthread_barrier_wait(&round_go);
	}
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	return 0;
}
