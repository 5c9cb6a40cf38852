// A signal that comes faster than a ptrace stop's round trip, without a
// timer: each run of the SIGALRM handler raises SIGALRM again, for as
// long as again is 1. probe() is where snapctl stops. At its end the
// program prints how often the handler ran and whether SIGALRM is
// blocked ("runs 2 blocked 0": one SIGALRM sent at probe(), again set to
// 0 after one run of the handler).
#include <signal.h>
#include <stdio.h>

static volatile sig_atomic_t runs, again = 1;

static void on_alrm(int sig) {
	runs++;
	if (again)
		raise(sig);
}

void probe(void) {}

int main(void) {
	signal(SIGALRM, on_alrm);
	probe();
	sigset_t now;
	sigprocmask(SIG_BLOCK, NULL, &now);
	printf("runs %d blocked %d\n", (int)runs, sigismember(&now, SIGALRM));
	return 0;
}
