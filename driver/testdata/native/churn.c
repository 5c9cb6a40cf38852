// Threads that allocate without a pause, as a busy server's do while
// snapctl attaches with --sites: five threads free and allocate blocks of
// up to 4 KiB in a loop, and a sixth starts a thread that allocates a
// block, frees it and exits, every millisecond. main waits in pause().
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *churn(void *arg) {
	unsigned seed = (unsigned)(long)arg;
	void *kept[64] = {0};
	for (;;) {
		int i = rand_r(&seed) % 64;
		free(kept[i]);
		kept[i] = malloc(16 + rand_r(&seed) % 4096);
	}
	return 0;
}

static void *brief(void *arg) {
	(void)arg;
	free(malloc(100));
	return 0;
}

static void *starter(void *arg) {
	(void)arg;
	struct timespec ms = {0, 1000000};
	for (;;) {
		pthread_t t;
		if (pthread_create(&t, 0, brief, 0) == 0)
			pthread_join(t, 0);
		nanosleep(&ms, 0);
	}
	return 0;
}

int main(void) {
	pthread_t t;
	for (long i = 1; i <= 5; i++)
		pthread_create(&t, 0, churn, (void *)i);
	pthread_create(&t, 0, starter, 0);
	for (;;)
		pause();
}
