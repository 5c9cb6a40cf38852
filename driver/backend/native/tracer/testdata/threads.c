/* threads.c: the tracer's test program. WORKERS threads each call hot()
 * CALLS times (0: until told to quit), while the main thread starts a
 * short-lived helper thread every millisecond. It prints "ready ADDR"
 * (hot's address) and reads commands from standard input:
 *   go      the workers start;
 *   count   prints the calls of hot() so far;
 *   wait    waits for the workers, prints "done CALLS", exits with 3;
 *   crash   dies of SIGSEGV in crash();
 *   vfork   a new thread prints its id and vforks a child that exits
 *           after 1.5 s: the thread cannot stop meanwhile;
 *   quit    exits with 3.
 * A worker blocks no signal; SIGWINCH and SIGURG are left at their
 * defaults. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long calls;
static volatile int go, quit;
static long total;
static int helpers;

__attribute__((noinline)) void hot(long i) {
	__atomic_add_fetch(&total, 1, __ATOMIC_RELAXED);
	asm volatile("" ::"r"(i));
}

__attribute__((noinline)) void crash(void) {
	volatile int *p = 0;
	*p = 1;
}

static void *worker(void *arg) {
	(void)arg;
	while (!go)
		usleep(100);
	for (long i = 0; !quit && (calls == 0 || i < calls); i++) {
		hot(i);
		if (calls == 0 && i % 1000 == 0)
			usleep(100);
	}
	return 0;
}

static void *helper(void *arg) { return arg; }

static void *vforker(void *arg) {
	printf("vforking %ld\n", (long)gettid());
	if (vfork() == 0) {
		usleep(1500000);
		_exit(0);
	}
	return arg;
}

static void *starter(void *arg) {
	(void)arg;
	while (!quit) {
		pthread_t t;
		if (pthread_create(&t, 0, helper, 0) == 0) {
			pthread_join(t, 0);
			helpers++;
		}
		usleep(1000);
	}
	return 0;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 4;
	calls = argc > 2 ? atol(argv[2]) : 0;
	setvbuf(stdout, 0, _IOLBF, 0);
	pthread_t w[64], s;
	for (int i = 0; i < n; i++)
		pthread_create(&w[i], 0, worker, 0);
	pthread_create(&s, 0, starter, 0);
	printf("ready %p %p\n", (void *)hot, (void *)crash);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "go", 2)) {
			go = 1;
		} else if (!strncmp(line, "count", 5)) {
			printf("%ld\n", __atomic_load_n(&total, __ATOMIC_RELAXED));
		} else if (!strncmp(line, "wait", 4)) {
			for (int i = 0; i < n; i++)
				pthread_join(w[i], 0);
			printf("done %ld\n", total);
			exit(3);
		} else if (!strncmp(line, "vfork", 5)) {
			pthread_t t;
			pthread_create(&t, 0, vforker, 0);
		} else if (!strncmp(line, "crash", 5)) {
			crash();
		} else if (!strncmp(line, "quit", 4)) {
			exit(3);
		}
	}
	return 0;
}
