/* Two sites that grow by the same bytes per request: lose() drops its
 * block, keep() links its node into the global list registry. Each round
 * 4 worker threads, started and joined anew, serve 5 requests each, then
 * main reaches round_done(): per round 20 blocks of 32 bytes at each site.
 * With a second argument N >= 0, main dies of SIGSEGV after round N; with
 * a third, "fixed", lose() frees its block. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct node {
	struct node *next;
	char data[24];
};

struct node *registry; /* the holder */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int fixed;

__attribute__((noinline)) void keep(int id) {
	struct node *n = malloc(sizeof *n); /* kept */
	memset(n->data, id, sizeof n->data);
	pthread_mutex_lock(&lock);
	n->next = registry;
	registry = n;
	pthread_mutex_unlock(&lock);
}

__attribute__((noinline)) void lose(int id) {
	char *volatile p = malloc(32); /* lost */
	memset(p, id, 32);
	if (fixed)
		free(p);
	p = NULL;
}

static void *worker(void *arg) {
	int id = (int)(long)arg;
	for (int i = 0; i < 5; i++) {
		lose(id);
		keep(id);
	}
	return NULL;
}

__attribute__((noinline)) void round_done(int round) {
	__asm__ volatile("" ::: "memory");
	(void)round;
}

int main(int argc, char **argv) {
	int rounds = argc > 1 ? atoi(argv[1]) : 4;
	int crash = argc > 2 ? atoi(argv[2]) : -1;
	fixed = argc > 3 && strcmp(argv[3], "fixed") == 0;
	for (int r = 0; r < rounds; r++) {
		pthread_t t[4];
		for (long i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, worker, (void *)i);
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
		round_done(r);
		if (r == crash)
			*(volatile int *)0 = 1; /* the crash */
	}
	return 0;
}
