// A signal that comes faster than a ptrace stop's round trip, without a
// timer: each run of the SIGALRM handler raises SIGALRM again, 300,000
// times in all, which the program's own runs take well under a second.
// probe() is where snapctl stops; a SIGALRM sent there runs the chain as
// the program goes on. At its end the program prints how
// often the handler ran and whether SIGALRM is blocked:
// "runs 300000 blocked 0".
#include <signal.h>
#include <stdio.h>

#define RUNS 300000

static volatile sig_atomic_t runs;

static void on_alrm(int sig) {
	if (++runs < RUNS)
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
