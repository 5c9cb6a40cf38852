// A corrupted heap: the link of a freed 24-byte chunk in glibc's fastbin
// is overwritten after the free, so that walking the bins (mallinfo2)
// follows a wild pointer. The program allocates nothing of that size
// again, and exits normally. With an argument, a second thread waits in
// read(2) until the end, so that the stop is a threaded program's.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int pipefd[2];

void round_done(void) {}

static void *waiter(void *arg) {
	(void)arg;
	char c;
	read(pipefd[0], &c, 1);
	return NULL;
}

int main(int argc, char **argv) {
	(void)argv;
	pthread_t t;
	if (argc > 1) {
		if (pipe(pipefd) != 0)
			return 1;
		pthread_create(&t, NULL, waiter, NULL);
	}
	void *p[8];
	for (int i = 0; i < 8; i++)
		p[i] = malloc(24);
	// Seven go to the thread's cache, the eighth to a fastbin.
	for (int i = 0; i < 8; i++)
		free(p[i]);
	memset(p[7], 0x41, 8);
	round_done();
	if (argc > 1) {
		write(pipefd[1], "x", 1);
		pthread_join(t, NULL);
	}
	return 0;
}
