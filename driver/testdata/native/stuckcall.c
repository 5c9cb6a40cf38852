// Calls of gdb's that a signal in another thread interrupts, and that do
// not return in time. Five threads: a raiser raises SIGUSR1 (gdb stops at
// it and passes it on; the program handles it) every 5 ms and counts it
// in raised; three workers allocate and free in a loop, counting in work;
// main waits in pause(). stuck() waits for two signals, so that gdb
// always gives its call up, then sleeps until release is set, counting
// its returns in calls. dup3() is the program's own (gdb's calls find it
// before libc's), as mode says: 0 libc's at once; 1 two signals, then
// the dup; 2 the dup, then two signals; 3 the dup, then until release;
// 4 until release, then the dup. held_fd is the write end of a pipe.
// main prints its pid and the addresses of raised, work and release
// (read and written through /proc/PID/mem), then waits.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile int raised, calls, release, mode;
static volatile long work[3];
int held_fd = -1;

static void wait_signals(int n) {
	int from = raised;
	struct timespec ms = {0, 1000000};
	while (raised < from + n)
		nanosleep(&ms, 0);
}

static void wait_release(void) {
	struct timespec tick = {0, 100000000};
	while (!release)
		nanosleep(&tick, 0);
}

void stuck(void) {
	wait_signals(2);
	wait_release();
	calls++;
}

int dup3(int from, int to, int flags) {
	if (mode == 1)
		wait_signals(2);
	if (mode == 4)
		wait_release();
	int r = syscall(SYS_dup3, from, to, flags);
	if (mode == 2)
		wait_signals(2);
	if (mode == 3)
		wait_release();
	return r;
}

static void on_usr1(int sig) { (void)sig; }

static void *raiser(void *arg) {
	(void)arg;
	struct timespec tick = {0, 5000000};
	for (;;) {
		nanosleep(&tick, 0);
		raise(SIGUSR1);
		raised++;
	}
	return 0;
}

static void *worker(void *arg) {
	volatile long *n = arg;
	struct timespec tick = {0, 200000};
	for (;;) {
		free(malloc(64 + (*n & 255)));
		(*n)++;
		nanosleep(&tick, 0);
	}
	return 0;
}

int main(void) {
	struct sigaction sa = {0};
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, 0);
	int ends[2];
	if (pipe(ends) == 0)
		held_fd = ends[1];
	pthread_t t;
	pthread_create(&t, 0, raiser, 0);
	for (int i = 0; i < 3; i++)
		pthread_create(&t, 0, worker, (void *)&work[i]);
	printf("%d %p %p %p\n", getpid(), (void *)&raised, (void *)work, (void *)&release);
	fflush(stdout);
	for (;;)
		pause();
}
