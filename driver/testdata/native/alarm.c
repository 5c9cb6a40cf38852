// A fast signal timer: SIGALRM every 200 us (argument 2, in us) while
// THREADS threads (argument 3, default 1: main alone) call work() CALLS
// times each (argument 1, default 5), allocating. gdb passes SIGALRM
// without stopping, and most signals come while gdb steps a thread over
// the breakpoint. It prints "calls N ticks T".
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static atomic_long ticks;
static atomic_int calls;
static int per;

static void on_alarm(int sig) {
	(void)sig;
	atomic_fetch_add(&ticks, 1);
}

void work(int i) {
	(void)i;
	atomic_fetch_add(&calls, 1);
}

static void *worker(void *arg) {
	(void)arg;
	for (int i = 0; i < per; i++) {
		free(malloc(64 + i));
		work(i);
	}
	return NULL;
}

int main(int argc, char **argv) {
	per = argc > 1 ? atoi(argv[1]) : 5;
	long us = argc > 2 ? atol(argv[2]) : 200;
	int n = argc > 3 ? atoi(argv[3]) : 1;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = {{0, us}, {0, us}};
	setitimer(ITIMER_REAL, &it, NULL);
	pthread_t t[64];
	if (n > 64)
		n = 64;
	for (int i = 1; i < n; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	worker(NULL);
	for (int i = 1; i < n; i++)
		pthread_join(t[i], NULL);
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	printf("calls %d ticks %ld\n", atomic_load(&calls), atomic_load(&ticks));
	return 0;
}
