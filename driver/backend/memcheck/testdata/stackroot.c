/* Each of 4 worker threads links 5 nodes a round into a list whose head
 * is a local of its own (on the thread's stack), then reaches mark(); the
 * threads wait for each other before they return, so that every list is
 * still held at the last stop. */
#include <pthread.h>
#include <stdlib.h>

struct node {
	struct node *next;
	char data[24];
};

static pthread_barrier_t done;

__attribute__((noinline)) void mark(void) { __asm__ volatile("" ::: "memory"); }

static void *worker(void *arg) { /* the holder's frame */
	struct node *volatile head = NULL;
	(void)arg;
	for (int r = 0; r < 3; r++) {
		for (int i = 0; i < 5; i++) {
			struct node *n = malloc(sizeof *n); /* held */
			n->next = head;
			head = n;
		}
		mark();
	}
	pthread_barrier_wait(&done);
	return NULL;
}

int main(void) {
	pthread_t t[4];
	pthread_barrier_init(&done, NULL, 4);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	return 0;
}
