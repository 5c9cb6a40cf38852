// A signal handler that does not return: the SIGALRM handler spins for
// as long as done is 0, which nothing sets, so that a direct call made at
// probe() into which SIGALRM is delivered is given up inside it. After
// probe() the program prints whether SIGALRM is blocked ("blocked 1") and
// how often the handler began: "blocked 0 began 1" when the thread was
// put back with its signal mask.
#include <signal.h>
#include <stdio.h>

static volatile sig_atomic_t began, done;

static void on_alrm(int sig) {
	(void)sig;
	began++;
	while (!done)
		;
}

void probe(void) {}

int main(void) {
	signal(SIGALRM, on_alrm);
	probe();
	sigset_t now;
	sigprocmask(SIG_BLOCK, NULL, &now);
	printf("blocked %d began %d\n", sigismember(&now, SIGALRM), (int)began);
	return 0;
}
