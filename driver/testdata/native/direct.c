// The native backend's direct calls (agent.py's direct_call): at each of
// four calls of probe() the process has one thread, holds three 100-byte
// blocks, counts SIGALRM, SIGUSR2 and SIGSEGV in handlers, and has
// fault(), which reads address 0, and raiser(), which raises a signal; at
// probe2() it has a second thread, which waits. At its end it prints what
// the handlers counted and whether the blocks are intact.
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t alrm, usr2, segv;

static void on_alrm(int sig) {
	(void)sig;
	alrm++;
}

static void on_usr2(int sig) {
	(void)sig;
	usr2++;
}

// Returning is safe: the SIGSEGV this counts is one sent with tgkill.
static void on_segv(int sig) {
	(void)sig;
	segv++;
}

int fault(int *p) { return *p; }

int raiser(int sig) { return raise(sig); }

void probe(int n) { (void)n; }

void probe2(void) {}

static int fds[2];

static void *waiter(void *arg) {
	char c;
	(void)arg;
	return read(fds[0], &c, 1) == 1 ? NULL : arg;
}

int main(void) {
	signal(SIGALRM, on_alrm);
	signal(SIGUSR2, on_usr2);
	signal(SIGSEGV, on_segv);
	char *b[3];
	for (int i = 0; i < 3; i++) {
		b[i] = malloc(100);
		memset(b[i], 'a' + i, 100);
	}
	for (int i = 0; i < 4; i++)
		probe(i);
	pthread_t t;
	if (pipe(fds) != 0 || pthread_create(&t, NULL, waiter, NULL) != 0)
		return 2;
	probe2();
	if (write(fds[1], "x", 1) != 1 || pthread_join(t, NULL) != 0)
		return 2;
	int ok = 1;
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 100; j++)
			ok &= b[i][j] == 'a' + i;
	printf("alrm %d usr2 %d segv %d intact %d\n", (int)alrm, (int)usr2, (int)segv, ok);
	return 0;
}
