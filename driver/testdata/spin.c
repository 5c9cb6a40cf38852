// spin.c: threads that call work(). Rounds of four threads start, call
// work() 20 times each and exit: argv[1] rounds (80 calls each), or
// without end when it is absent or 0; argv[2] milliseconds of sleep
// between rounds (default 0).
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

volatile int sink;

void work(int i)
{
	sink = i;
}

static void *worker(void *arg)
{
	for (int i = 0; i < 20; i++)
		work((int)(long)arg + i);
	return NULL;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 0;
	long ms = argc > 2 ? atol(argv[2]) : 0;
	struct timespec pause = {ms / 1000, (ms % 1000) * 1000000};
	for (int r = 0; rounds == 0 || r < rounds; r++) {
		pthread_t t[4];
		for (long i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, worker, (void *)i);
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
		if (ms)
			nanosleep(&pause, NULL);
	}
	return 0;
}
