// A breakpoint in a signal handler that interrupted the allocator, in a
// program with one thread: main points stderr at a full pipe and calls
// malloc_stats(), which blocks in write(2) inside the main arena's lock.
// A SIGALRM timer (every 20 ms) runs the handler there, which calls
// in_handler(): at those stops the stopped thread itself holds the lock.
// After HITS (argument 1, default 4) the handler drains the pipe and
// stops the timer, malloc_stats() finishes, and main calls after() AFTER
// times (argument 2, default 3). It prints "handled N after M".
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static int pipefd[2], hits = 4;
static volatile int handled;
static int afters;

void in_handler(int n) {
	(void)n;
	handled++;
}

void after(int i) {
	(void)i;
	afters++;
}

static void on_alarm(int sig) {
	(void)sig;
	if (handled >= hits)
		return;
	in_handler(handled);
	if (handled == hits) {
		struct itimerval off = {{0, 0}, {0, 0}};
		setitimer(ITIMER_REAL, &off, NULL);
		char buf[4096];
		while (read(pipefd[0], buf, sizeof buf) > 0)
			;
	}
}

int main(int argc, char **argv) {
	if (argc > 1)
		hits = atoi(argv[1]);
	int n = argc > 2 ? atoi(argv[2]) : 3;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("start\n");
	if (pipe(pipefd) != 0)
		return 1;
	fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
	char block[4096];
	memset(block, 'x', sizeof block);
	fcntl(pipefd[1], F_SETFL, O_NONBLOCK);
	while (write(pipefd[1], block, sizeof block) > 0 || write(pipefd[1], block, 1) > 0)
		;
	fcntl(pipefd[1], F_SETFL, 0);
	int saved = dup(2);
	dup2(pipefd[1], 2);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = {{0, 20000}, {0, 20000}};
	setitimer(ITIMER_REAL, &it, NULL);
	malloc_stats();
	dup2(saved, 2);
	for (int i = 0; i < n; i++)
		after(i);
	printf("handled %d after %d\n", handled, afters);
	return 0;
}
