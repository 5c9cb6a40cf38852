// THREADS workers (argument 1, default 4) and main each leave freed
// chunks in their own tcache (glibc's per-thread cache), which mallinfo2
// counts as in use. Participant ID (main is 0, the workers 1..THREADS):
// - before checkpoint(0): frees one block of 1000 bytes (a 1008-byte
//   chunk, tcache bin 61), which also makes its tcache;
// - before checkpoint(1): keeps 10 blocks of 100 + 16 ID + 8 K bytes
//   (K = 0..9), then, for S = 0..5, allocates 1 + (ID + S) % 7 blocks of
//   24 + 200 S bytes and frees them all: no more than a tcache bin holds
//   (7), so every one stays in the tcache.
// At both stops every worker is parked at a barrier. After the run main
// prints what mallinfo2() returned just before each stop:
//   round R uordblks U fordblks F
// and "calls N" (checkpoint's calls); nothing is printed before, so that
// stdout's buffer is allocated after the stops.
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_barrier_t parked, go_on;
static struct mallinfo2 seen[2];
static void *keep[65][10];
static int calls;

void checkpoint(int round) {
	(void)round;
	calls++;
}

static void before(void) {
	free(malloc(1000));
}

static void build(int id) {
	void *tmp[7];
	for (int k = 0; k < 10; k++)
		keep[id][k] = malloc(100 + 16 * id + 8 * k);
	for (int s = 0; s < 6; s++) {
		int n = 1 + (id + s) % 7;
		for (int i = 0; i < n; i++)
			tmp[i] = malloc(24 + 200 * s);
		for (int i = 0; i < n; i++)
			free(tmp[i]);
	}
}

static void *worker(void *arg) {
	before();
	pthread_barrier_wait(&parked);
	pthread_barrier_wait(&go_on);
	build((int)(long)arg);
	pthread_barrier_wait(&parked);
	pthread_barrier_wait(&go_on);
	return NULL;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 4;
	pthread_t t[64];
	if (n > 64)
		n = 64;
	pthread_barrier_init(&parked, NULL, n + 1);
	pthread_barrier_init(&go_on, NULL, n + 1);
	before();
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, worker, (void *)(long)(i + 1));
	pthread_barrier_wait(&parked);
	seen[0] = mallinfo2();
	checkpoint(0);
	pthread_barrier_wait(&go_on);
	build(0);
	pthread_barrier_wait(&parked);
	seen[1] = mallinfo2();
	checkpoint(1);
	pthread_barrier_wait(&go_on);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	for (int r = 0; r < 2; r++)
		printf("round %d uordblks %zu fordblks %zu\n", r, seen[r].uordblks, seen[r].fordblks);
	printf("calls %d\n", calls);
	return 0;
}
