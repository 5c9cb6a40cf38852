// A fragmented heap, as a decoder or a graph library leaves one: BLOCKS
// small blocks (argument 1) allocated and every other one freed, so that
// nothing coalesces and the freed half stays in glibc's lists (tcaches,
// fastbins, and for the larger sizes the unsorted, small and large bins).
// THREADS (argument 2, main included) share the work, each in an arena of
// its own while there are enough; in every round of ROUNDS (argument 3)
// a thread more starts, fragments its arena and exits, and the others
// wait at a barrier. With every other thread parked, main reads
// mallinfo2(), calls checkpoint() (the stop) and prints what mallinfo2()
// said, one line per round:
//   round R arena A ordblks O smblks S hblks H hblkhd D usmblks U fsmblks F uordblks X fordblks Y keepcost K
//   mallinfo2 took T ms cpu C ms
// then, with a fourth argument "alloc", allocates and frees again in
// every thread after the stop (a lock left held would hang it), and
// prints "calls N" at the end.
//
// With a fifth argument "stop" main stops the whole process with SIGSTOP
// after reading mallinfo2() instead of calling checkpoint, for a reader
// that is not a debugger (internal/arenas' tests). A sixth, "small",
// makes the small heap (see fragment) instead of the mixed one. "-"
// stands for an argument left out.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_barrier_t parked, go_on;
static int rounds = 3, again, selfstop, small;
static long blocks = 100000;
static int threads = 1;
static int calls;

void checkpoint(int round) {
	(void)round;
	calls++;
}

// fragment allocates n blocks and frees every other one. In the mixed
// heap most are small enough for the fastbins (up to 120 bytes asked, a
// 128-byte chunk) and one in 16 is larger; halfway through the frees a
// malloc of a size no bin holds yet sorts what was freed so far into the
// small and large bins (after moving the fastbins' chunks there), so the
// second half of the frees fills the fastbins again. The small heap is
// blocks of 16 to 40 bytes asked (32 to 48-byte chunks), every other one
// freed, into the tcache and the fastbins. Either also keeps a block
// mmapped of its own.
static void **fragment(long n, unsigned seed) {
	void **keep = malloc((n + 2) * sizeof *keep);
	keep[n] = malloc(300000 + seed % 4096);
	for (long i = 0; i < n; i++) {
		seed = seed * 1103515245 + 12345;
		size_t size;
		if (small)
			size = 16 + (seed >> 16) % 25;
		else
			size = (i % 16 == 15) ? 200 + (seed >> 16) % 3000 : 16 + (seed >> 16) % 105;
		keep[i] = malloc(size);
		memset(keep[i], 1, 8);
	}
	for (long i = 0; i < n; i += 2) {
		if (!small && i == (n / 2 & ~1L))
			keep[n + 1] = malloc(5000);
		free(keep[i]);
		keep[i] = NULL;
	}
	return keep;
}

static void churn(void) {
	for (int i = 0; i < 1000; i++)
		free(malloc(16 + i % 2000));
}

static void *worker(void *arg) {
	long id = (long)arg;
	fragment(blocks / threads, (unsigned)id);
	for (int r = 0; r < rounds; r++) {
		pthread_barrier_wait(&parked);
		pthread_barrier_wait(&go_on);
		if (again)
			churn();
	}
	return NULL;
}

static void *passing(void *arg) {
	long id = (long)arg;
	fragment(blocks / threads / 4 + 1, (unsigned)id * 7);
	return NULL;
}

int main(int argc, char **argv) {
	if (argc > 1)
		blocks = atol(argv[1]);
	if (argc > 2)
		threads = atoi(argv[2]);
	if (argc > 3)
		rounds = atoi(argv[3]);
	again = argc > 4 && strcmp(argv[4], "alloc") == 0;
	selfstop = argc > 5 && strcmp(argv[5], "stop") == 0;
	small = argc > 6 && strcmp(argv[6], "small") == 0;
	if (threads < 1)
		threads = 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("threads %d blocks %ld\n", threads, blocks);
	pthread_t *t = calloc(threads, sizeof *t);
	pthread_barrier_init(&parked, NULL, threads);
	pthread_barrier_init(&go_on, NULL, threads);
	for (long i = 1; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	fragment(blocks / threads, 99);
	for (int r = 0; r < rounds; r++) {
		// A thread that starts, fragments an arena and exits: its arena
		// stays, with its free lists, for the next thread.
		pthread_t p;
		pthread_create(&p, NULL, passing, (void *)(long)(r + 100));
		pthread_join(p, NULL);
		pthread_barrier_wait(&parked);
		struct timespec t0, t1, c0, c1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
		struct mallinfo2 m = mallinfo2();
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (selfstop)
			raise(SIGSTOP);
		else
			checkpoint(r);
		printf("round %d arena %zu ordblks %zu smblks %zu hblks %zu hblkhd %zu usmblks %zu fsmblks %zu uordblks %zu fordblks %zu keepcost %zu\n",
		       r, m.arena, m.ordblks, m.smblks, m.hblks, m.hblkhd, m.usmblks, m.fsmblks, m.uordblks, m.fordblks, m.keepcost);
		printf("mallinfo2 took %.3f ms cpu %.3f ms\n", (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6,
		       (c1.tv_sec - c0.tv_sec) * 1e3 + (c1.tv_nsec - c0.tv_nsec) / 1e6);
		pthread_barrier_wait(&go_on);
		if (again)
			churn();
	}
	for (long i = 1; i < threads; i++)
		pthread_join(t[i], NULL);
	printf("calls %d\n", calls);
	return 0;
}
