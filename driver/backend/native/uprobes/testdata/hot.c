#define _GNU_SOURCE
/* hot THREADS CALLS MODE: THREADS threads call hot() CALLS times each
 * once a line arrives on stdin. MODE "handler" catches SIGWINCH and
 * counts the signals that arrived inside hot(); "block" also has every
 * thread block all signals first. It prints "ready ADDR" (hot's address)
 * first and "caught N outside M" at the end. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

static volatile long sink;
static long calls;
static int block;
static volatile long caught, outside;

__attribute__((noinline)) void hot(long i) { sink += i; }

static void on_winch(int sig, siginfo_t *si, void *uc) {
	(void)sig; (void)si;
	uintptr_t pc = ((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
	if (pc > (uintptr_t)hot && pc < (uintptr_t)hot + 32)
		__atomic_add_fetch(&caught, 1, __ATOMIC_SEQ_CST);
	else
		__atomic_add_fetch(&outside, 1, __ATOMIC_SEQ_CST);
}

static void *worker(void *arg) {
	(void)arg;
	if (block) {
		sigset_t all;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, NULL);
	}
	for (long i = 0; i < calls; i++)
		hot(i);
	return NULL;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 4;
	calls = argc > 2 ? atol(argv[2]) : 500000;
	const char *mode = argc > 3 ? argv[3] : "plain";
	block = strcmp(mode, "block") == 0;
	if (block || strcmp(mode, "handler") == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = on_winch;
		sa.sa_flags = SA_SIGINFO | SA_RESTART;
		sigaction(SIGWINCH, &sa, NULL);
	}
	printf("ready %p\n", (void *)hot);
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		return 1;
	pthread_t t[64];
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("caught %ld outside %ld\n", caught, outside);
	return 0;
}
