// THREADS workers (argument 1, default 8), each in an arena of its own
// once there are enough, build a heap with chunks in every kind of place
// glibc keeps them: in use, in a thread's tcache, in fastbins, in the
// unsorted, small and large bins, and blocks mmapped one each. Each of
// ROUNDS rounds (argument 2, default 3) then parks every worker at a
// barrier, and main reads mallinfo2() and calls checkpoint(): at that
// stop nothing runs, so the native backend's figures must be exactly
// mallinfo2's, which main prints after the stop, one line per round:
//   round R uordblks U fordblks F hblkhd H arena A
// and "calls N" at the end (checkpoint's calls).
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_barrier_t parked, go_on;
static int rounds = 3;
static struct mallinfo2 seen;
static int calls;

void checkpoint(int round) {
	(void)round;
	calls++;
}

static void build(int id, int round, void **keep, int nkeep) {
	void *tmp[64];
	// Fastbins: more than a tcache holds (7) of one small size, freed.
	for (int i = 0; i < 20; i++)
		tmp[i] = malloc(24 + 16 * (id % 3));
	for (int i = 0; i < 20; i++)
		free(tmp[i]);
	// Small and large bins: blocks between live ones, freed.
	for (int i = 0; i < 40; i++)
		tmp[i] = malloc(i % 2 ? 1500 + 100 * i : 40000 + 512 * i);
	for (int i = 0; i < nkeep; i++)
		keep[i] = malloc(100 + 13 * i + round);
	for (int i = 0; i < 40; i += 2)
		free(tmp[i]);
	for (int i = 1; i < 40; i += 2)
		free(tmp[i]);
	// A large block, mmapped (none is freed: that would raise glibc's
	// mmap threshold).
	keep[nkeep] = malloc((1 << 20) + 4096 * id);
}

static void *worker(void *arg) {
	int id = (int)(long)arg;
	void *keep[51 * 16];
	for (int r = 0; r < rounds; r++) {
		build(id, r, keep + 51 * r, 50);
		pthread_barrier_wait(&parked);
		pthread_barrier_wait(&go_on);
	}
	return NULL;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 8;
	if (argc > 2)
		rounds = atoi(argv[2]);
	if (rounds > 16)
		rounds = 16;
	pthread_t *t = calloc(n, sizeof *t);
	pthread_barrier_init(&parked, NULL, n + 1);
	pthread_barrier_init(&go_on, NULL, n + 1);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("threads %d\n", n);
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, worker, (void *)(long)i);
	for (int r = 0; r < rounds; r++) {
		pthread_barrier_wait(&parked);
		seen = mallinfo2();
		checkpoint(r);
		printf("round %d uordblks %zu fordblks %zu hblkhd %zu arena %zu\n", r, seen.uordblks, seen.fordblks, seen.hblkhd, seen.arena);
		pthread_barrier_wait(&go_on);
	}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("calls %d\n", calls);
	return 0;
}
