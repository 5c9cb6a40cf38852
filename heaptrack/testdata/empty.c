/* empty.c: four threads that keep blocks of 0 bytes (malloc(0), a real
 * leak: glibc gives each a chunk of its smallest size) beside blocks of
 * 16 bytes, round after round. After round r (0-based) has ended, main
 * calls round_done(r) with every worker waiting at a barrier, so a stop
 * there sees, per round:
 *   keep_empty: malloc(0), kept   -> 4 blocks, 0 bytes
 *   keep_some: malloc(16), kept   -> 4 blocks, 64 bytes
 * Usage: empty ROUNDS */
#include <pthread.h>
#include <stdlib.h>

#define THREADS 4

static pthread_barrier_t round_end, round_go;
static int rounds;
static void *volatile kept[4096];
static int nkept;
static pthread_mutex_t keep_lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((noinline)) void *keep_empty(void) { return malloc(0); }
__attribute__((noinline)) void *keep_some(void) { return malloc(16); }

static void keep(void *p)
{
	pthread_mutex_lock(&keep_lock);
	kept[nkept++] = p;
	pthread_mutex_unlock(&keep_lock);
}

static void *worker(void *arg)
{
	(void)arg;
	for (int r = 0; r < rounds; r++) {
		keep(keep_empty());
		keep(keep_some());
		pthread_barrier_wait(&round_end);
		pthread_barrier_wait(&round_go);
	}
	return NULL;
}

__attribute__((noinline)) void round_done(int r) { __asm__ volatile("" : : "r"(r)); }

int main(int argc, char **argv)
{
	rounds = argc > 1 ? atoi(argv[1]) : 3;
	if (rounds > 500)
		rounds = 500;
	pthread_t t[THREADS];
	pthread_barrier_init(&round_end, NULL, THREADS + 1);
	pthread_barrier_init(&round_go, NULL, THREADS + 1);
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int r = 0; r < rounds; r++) {
		pthread_barrier_wait(&round_end);
		round_done(r);
		pthread_barrier_wait(&round_go);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	return 0;
}
