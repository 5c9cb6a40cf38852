/* early.c: a server that may give up before serving anything, as
 * memcached does when it cannot raise its file limit under valgrind.
 *
 * It starts four worker threads, which allocate and exit. With argv[1]
 * "fail" it then exits with status 71 before handle_request ever runs;
 * otherwise it handles argv[2] requests (default 3), each keeping 32
 * bytes, and exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *kept[64];

static void *worker(void *arg)
{
	free(malloc(64 + (size_t)arg));
	return NULL;
}

void handle_request(int i)
{
	kept[i] = malloc(32); /* the leak */
}

int main(int argc, char **argv)
{
	pthread_t th[4];
	for (long i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	if (argc > 1 && strcmp(argv[1], "fail") == 0) {
		fprintf(stderr, "failed to set rlimit for open files\n");
		return 71;
	}
	int n = argc > 2 ? atoi(argv[2]) : 3;
	for (int i = 0; i < n && i < 64; i++)
		handle_request(i);
	return 0;
}
