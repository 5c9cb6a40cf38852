// A call that keeps exactly one 4000-byte block (keep_one) while another
// thread allocates 64-byte blocks and keeps them as fast as it can. Under
// scheduler-locking only the calling thread runs during the call, so the
// call's in-use delta is its own block: 4016 bytes (4000 + 8, rounded up
// to 16). wait_for_other blocks until the other thread answers: under the
// lock it never returns until the lock is released. With the argument
// "mutex", the other thread holds a mutex for 1 ms at a time instead, and
// main calls take_shared(), which needs it, 4 times: under the lock a call
// that finds it held waits in futex(2) for a thread that does not run.
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static void *kept[16];
static volatile int answered, stop, mutex_mode;
static pthread_mutex_t shared = PTHREAD_MUTEX_INITIALIZER;

void take_shared(void) {
	pthread_mutex_lock(&shared);
	pthread_mutex_unlock(&shared);
}

void *keep_one(int i) {
	kept[i] = malloc(4000);
	return kept[i];
}

void wait_for_other(void) {
	answered = 0;
	while (!answered)
		usleep(1000);
}

static void *other(void *arg) {
	(void)arg;
	while (!stop) {
		if (mutex_mode) {
			pthread_mutex_lock(&shared);
			answered = 1;
			usleep(1000);
			pthread_mutex_unlock(&shared);
			usleep(100);
			continue;
		}
		volatile char *p = malloc(64);
		p[0] = 1;
		answered = 1;
		usleep(100);
	}
	return NULL;
}

int main(int argc, char **argv) {
	int block = argc > 1;
	mutex_mode = block && argv[1][0] == 'm';
	pthread_t t;
	pthread_create(&t, NULL, other, NULL);
	// The other thread has allocated, in an arena of its own, before the
	// first call.
	while (!answered)
		usleep(1000);
	for (int i = 0; i < 4; i++) {
		keep_one(i);
		usleep(2000);
	}
	if (mutex_mode)
		for (int i = 0; i < 4; i++)
			take_shared();
	else if (block)
		wait_for_other();
	stop = 1;
	pthread_join(t, NULL);
	return 0;
}
