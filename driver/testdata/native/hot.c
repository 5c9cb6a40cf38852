/* hot THREADS CALLS [MODE]: THREADS threads call hot() CALLS times each,
 * hot() allocating nothing, each thread leaking 64 bytes per 1,000 calls.
 * MODE "block": every thread blocks all signals first; "winch": the program
 * catches SIGWINCH and raises it once in each thread (a signal of its own).
 * It prints "calls N" (all threads' calls) and "winch N" at the end;
 * started counts the calls that got past hot()'s first statement. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile long sink;
static void *volatile kept;
static long calls;
static const char *mode = "plain";
static long total;
static volatile long winches;
static long started;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

__attribute__((noinline)) void hot(long i) {
	sink += i;
	__atomic_add_fetch(&started, 1, __ATOMIC_RELAXED);
	if (i % 1000 == 999)
		kept = malloc(64);
}

static void on_winch(int sig) { (void)sig; __atomic_add_fetch(&winches, 1, __ATOMIC_SEQ_CST); }

static void *worker(void *arg) {
	(void)arg;
	if (strcmp(mode, "block") == 0) {
		sigset_t all;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, NULL);
	}
	if (strcmp(mode, "winch") == 0)
		pthread_kill(pthread_self(), SIGWINCH);
	long i;
	for (i = 0; i < calls; i++)
		hot(i);
	pthread_mutex_lock(&mu);
	total += i;
	pthread_mutex_unlock(&mu);
	return NULL;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 4;
	calls = argc > 2 ? atol(argv[2]) : 500000;
	if (argc > 3)
		mode = argv[3];
	if (strcmp(mode, "winch") == 0)
		signal(SIGWINCH, on_winch);
	pthread_t t[64];
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("calls %ld\nwinch %ld\n", total, winches);
	return 0;
}
