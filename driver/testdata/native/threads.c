// THREADS workers (argument 1) call work() CALLS times each (argument 2),
// allocating as they go and keeping one block in four. With "exit"
// (argument 3) they start in two waves: the first wave runs to its end
// and its threads exit while main waits in pthread_join, then the second
// starts, so threads start and exit throughout the run. It prints the
// calls of work() it counted: "calls N".
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int per;
static atomic_int calls;

void work(int id, int i) {
	(void)id;
	(void)i;
	atomic_fetch_add(&calls, 1);
}

static void *worker(void *arg) {
	int id = (int)(long)arg;
	for (int i = 0; i < per; i++) {
		char *p = malloc(32 + (i * 37 + id) % 4000);
		memset(p, id, 16);
		work(id, i);
		if (i % 4)
			free(p);
	}
	return NULL;
}

static void wave(int from, int to) {
	pthread_t t[256];
	for (int i = from; i < to; i++)
		pthread_create(&t[i - from], NULL, worker, (void *)(long)i);
	for (int i = from; i < to; i++)
		pthread_join(t[i - from], NULL);
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 8;
	per = argc > 2 ? atoi(argv[2]) : 10;
	if (n > 256)
		n = 256;
	if (argc > 3 && strcmp(argv[3], "exit") == 0) {
		wave(0, n / 2);
		wave(n / 2, n);
	} else {
		wave(0, n);
	}
	printf("calls %d\n", atomic_load(&calls));
	return 0;
}
