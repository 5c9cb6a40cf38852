// Threads that start between two stops, each leaving known chunks in its
// tcache: main stops in checkpoint() alone (round 0), then with a thread
// on a stack pthread_create allocates (round 1), then also with a thread
// on a stack of the program's own (pthread_attr_setstack, round 2). At
// each round every thread is parked at a barrier, and main reads
// mallinfo2() before the stop and prints it after, one line a round:
//   round R uordblks U fordblks F
// Thread T (1 or 2) freed 3*T blocks of 100 bytes (112-byte chunks) into
// its tcache, so the tcaches hold 336 bytes at round 1 and 336 + 672 at
// round 2; main's holds none. "calls N" at the end.
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

// Round 1's barriers (main and thread 1), round 2's (all three).
static pthread_barrier_t parked1, go_on1, parked2, go_on2;
static int calls;
static void *kept[64];

void checkpoint(int round) {
	(void)round;
	calls++;
}

static void *worker(void *arg) {
	int t = (int)(long)arg;
	void *p[8];
	for (int i = 0; i < 3 * t; i++)
		p[i] = malloc(100);
	for (int i = 0; i < 3 * t; i++)
		free(p[i]);
	if (t == 1) {
		pthread_barrier_wait(&parked1);
		pthread_barrier_wait(&go_on1);
	}
	pthread_barrier_wait(&parked2);
	pthread_barrier_wait(&go_on2);
	return NULL;
}

static void round_(int r) {
	struct mallinfo2 m = mallinfo2();
	checkpoint(r);
	printf("round %d uordblks %zu fordblks %zu\n", r, m.uordblks, m.fordblks);
}

int main(void) {
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < 64; i++)
		kept[i] = malloc(200 + i);
	pthread_barrier_init(&parked1, NULL, 2);
	pthread_barrier_init(&go_on1, NULL, 2);
	pthread_barrier_init(&parked2, NULL, 3);
	pthread_barrier_init(&go_on2, NULL, 3);
	size_t size = 1 << 20;
	void *stack = malloc(size);
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstack(&a, stack, size);
	round_(0);
	pthread_t t1, t2;
	pthread_create(&t1, NULL, worker, (void *)1L);
	pthread_barrier_wait(&parked1);
	round_(1);
	pthread_barrier_wait(&go_on1);
	pthread_create(&t2, &a, worker, (void *)2L);
	pthread_barrier_wait(&parked2);
	round_(2);
	pthread_barrier_wait(&go_on2);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	printf("calls %d\n", calls);
	return 0;
}
