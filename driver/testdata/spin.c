// spin.c: threads that call work() without end. Rounds of four threads
// start, call work() 20 times each and exit, until the process is ended;
// with "steady", the same four threads call it forever.
#include <pthread.h>
#include <string.h>

volatile int sink;
static int steady;

void work(int i)
{
	sink = i;
}

static void *worker(void *arg)
{
	for (int i = 0; steady || i < 20; i++)
		work((int)(long)arg + i);
	return NULL;
}

int main(int argc, char **argv)
{
	steady = argc > 1 && strcmp(argv[1], "steady") == 0;
	for (;;) {
		pthread_t t[4];
		for (long i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, worker, (void *)i);
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
	}
}
