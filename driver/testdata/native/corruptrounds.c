// Keeps 100 bytes a round for 12 rounds, calling round_done after each,
// with a second thread waiting in read(2) throughout, so that each stop
// reads glibc's arenas from memory. After round argv[1] (0: before the
// first) the link of a freed 24-byte chunk in a fastbin is overwritten,
// as a buffer overrun would: from then on the walk of that fastbin, and
// so every stop's arena read, fails. Nothing of that size is allocated
// again, and the program exits normally.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int pipefd[2];

void round_done(int r) { (void)r; }

static void *waiter(void *arg) {
	(void)arg;
	char c;
	read(pipefd[0], &c, 1);
	return NULL;
}

int main(int argc, char **argv) {
	int corrupt_after = argc > 1 ? atoi(argv[1]) : 0;
	pthread_t t;
	if (pipe(pipefd) != 0)
		return 1;
	pthread_create(&t, NULL, waiter, NULL);
	void *p[8];
	for (int i = 0; i < 8; i++)
		p[i] = malloc(24);
	// Seven go to the thread's cache, the eighth to a fastbin.
	for (int i = 0; i < 8; i++)
		free(p[i]);
	for (int r = 0; r < 12; r++) {
		if (r == corrupt_after)
			memset(p[7], 0x41, 8);
		volatile char *q = malloc(100);
		q[0] = 1;
		round_done(r);
	}
	write(pipefd[1], "x", 1);
	pthread_join(t, NULL);
	return 0;
}
