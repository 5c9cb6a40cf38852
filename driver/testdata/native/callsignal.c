// A call of gdb's that a signal in another thread interrupts: a thread
// raises SIGUSR1 (gdb stops at it and passes it on; the program handles
// it) every 10 ms and counts it in raised. slow() returns once raised
// has grown by 2 since it began, so that a signal always comes while gdb
// calls it; it counts its returns in calls. take(s) counts its calls in
// taken: gdb passes its string in memory it allocates in the process with
// a call of malloc, which the signal can interrupt too. main prints its
// pid and the address of raised (read through /proc/PID/mem), then waits.
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static volatile int raised, calls, taken;

void slow(void) {
	int from = raised;
	struct timespec ms = {0, 1000000};
	while (raised < from + 2)
		nanosleep(&ms, 0);
	calls++;
}

int slow_value(void) {
	slow();
	return 42;
}

void take(const char *s) {
	(void)s;
	taken++;
}

static void on_usr1(int sig) { (void)sig; }

static void *raiser(void *arg) {
	(void)arg;
	struct timespec tick = {0, 10000000};
	for (;;) {
		nanosleep(&tick, 0);
		raise(SIGUSR1);
		raised++;
	}
	return 0;
}

int main(void) {
	struct sigaction sa = {0};
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, 0);
	pthread_t t;
	pthread_create(&t, 0, raiser, 0);
	printf("%d %p\n", getpid(), (void *)&raised);
	fflush(stdout);
	for (;;)
		pause();
}
