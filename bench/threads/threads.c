// threads.c: T threads (argv[1], default 8) share N calls of f (argv[2],
// default 320): each thread takes the next number from a shared counter
// and calls f with it until the counter reaches N, so a breakpoint on f
// stops exactly N times, in whichever threads the scheduler runs. The
// threads start calling f only once all T exist (a barrier), so every stop
// sees T threads. f keeps
// a 16-byte block per call in its thread's list, freed when the thread
// ends: the heap changes at every stop.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static atomic_int next;
static int calls = 320;
static pthread_barrier_t started;

struct node {
	struct node *next;
	int i;
};

struct node *f(struct node *list, int i)
{
	struct node *n = malloc(16);
	n->next = list;
	n->i = i;
	return n;
}

static void *worker(void *arg)
{
	(void)arg;
	struct node *list = NULL;
	pthread_barrier_wait(&started);
	for (;;) {
		int i = atomic_fetch_add(&next, 1);
		if (i >= calls)
			break;
		list = f(list, i);
	}
	while (list) {
		struct node *n = list->next;
		free(list);
		list = n;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int t = argc > 1 ? atoi(argv[1]) : 8;
	if (argc > 2)
		calls = atoi(argv[2]);
	if (t < 1 || t > 1024 || calls < 0) {
		fprintf(stderr, "usage: threads [THREADS [CALLS]]\n");
		return 2;
	}
	pthread_t *ids = calloc(t, sizeof *ids);
	pthread_barrier_init(&started, NULL, t);
	for (int k = 0; k < t; k++)
		if (pthread_create(&ids[k], NULL, worker, NULL) != 0) {
			perror("pthread_create");
			return 1;
		}
	for (int k = 0; k < t; k++)
		pthread_join(ids[k], NULL);
	free(ids);
	pthread_barrier_destroy(&started);
	return 0;
}
