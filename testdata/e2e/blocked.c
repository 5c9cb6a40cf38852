// blocked.c: a worker thread handles the requests while main sits blocked
// in read(2) on a pipe that the worker writes only when it is done.
//
// The worker sleeps first so that main is certainly inside read() when the
// first breakpoint hit arrives; each request leaks 32 bytes. The number of
// requests is argv[1] (default 4).
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int fds[2];
static void *kept[1024];

void handle_request(int id)
{
	kept[id % 1024] = malloc(32); // the leak: 32 bytes per request
}

static void *worker(void *arg)
{
	int n = *(int *)arg;
	struct timespec ts = {0, 200000000};
	nanosleep(&ts, NULL);
	for (int i = 0; i < n; i++)
		handle_request(i);
	if (write(fds[1], "x", 1) != 1)
		abort();
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4;
	pthread_t t;
	char c;
	if (pipe(fds) != 0)
		return 1;
	pthread_create(&t, NULL, worker, &n);
	if (read(fds[0], &c, 1) != 1) // main blocks here while the worker runs
		return 1;
	pthread_join(t, NULL);
	return 0;
}
