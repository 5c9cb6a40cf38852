// A program of THREADS threads (argument 1) that each allocate and free,
// so that each has a tcache of its own, then print their thread pointer
// (x86-64's fs base, which is glibc's pthread_t) one a line, after a line
// with mallinfo2's address, and wait for stdin to close.
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_barrier_t ready, done;

static void *work(void *arg) {
	(void)arg;
	free(malloc(100));
	pthread_barrier_wait(&ready);
	pthread_barrier_wait(&done);
	return NULL;
}

int main(int argc, char **argv) {
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	pthread_t th[64];
	free(malloc(100));
	pthread_barrier_init(&ready, NULL, threads + 1);
	pthread_barrier_init(&done, NULL, threads + 1);
	for (int i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, work, NULL);
	pthread_barrier_wait(&ready);
	printf("%p\n%p\n", (void *)mallinfo2, (void *)pthread_self());
	for (int i = 0; i < threads; i++)
		printf("%p\n", (void *)th[i]);
	fflush(stdout);
	char c;
	read(0, &c, 1);
	pthread_barrier_wait(&done);
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	return 0;
}
