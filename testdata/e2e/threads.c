// threads.c: a request loop that leaks 40 bytes per request while two noise
// threads allocate and free 64-byte buffers as fast as they can.
//
// The noise threads hold at most one buffer each at any moment, so their
// site can never grow for long; the request path keeps every session it
// opens. A breakpoint on handle_request sees the heap grow by exactly 40
// bytes at open_session's malloc between hits, give or take the two noise
// buffers that happen to be live. The number of requests is argv[1]
// (default 10).
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct session {
	int id;
	char key[36];
};

static struct session *sessions[1024];
static atomic_int stopping;

static void *noise(void *arg)
{
	(void)arg;
	while (!atomic_load(&stopping)) {
		char *buf = malloc(64); // noise: freed at once
		memset(buf, 1, 64);
		free(buf);
	}
	return NULL;
}

static struct session *open_session(int id)
{
	struct session *s = malloc(sizeof *s); // the leak: 40 bytes per request
	s->id = id;
	return s;
}

void handle_request(int id)
{
	sessions[id % 1024] = open_session(id);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10;
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, noise, NULL);
	for (int i = 0; i < n; i++) {
		struct timespec ts = {0, 2000000}; // let the noise threads run
		nanosleep(&ts, NULL);
		handle_request(i);
	}
	atomic_store(&stopping, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return 0;
}
