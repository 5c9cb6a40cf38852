// A heap that is the same at every call of step(): 4 workers each keep 5
// blocks and leave 3 freed ones in their tcache, then wait for good;
// main keeps 1000 blocks of 48 bytes, then forever allocates 10 blocks of
// 200 bytes, calls step(), and frees them. Once main has gone round once,
// glibc's arenas and every tcache are the same at each step(), so that
// two runs' measurements of it must agree field for field. It writes the
// file named by argument 1 once the workers wait.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static int parked;
static void *keep[4][5];

__attribute__((noinline)) void step(long i) { __asm__ volatile("" ::"r"(i)); }

static void *worker(void *arg) {
	long id = (long)arg;
	void *f[3];
	for (int i = 0; i < 5; i++)
		keep[id][i] = malloc(100 + 16 * id);
	for (int i = 0; i < 3; i++)
		f[i] = malloc(40);
	for (int i = 0; i < 3; i++)
		free(f[i]);
	pthread_mutex_lock(&mu);
	parked++;
	for (;;)
		pthread_cond_wait(&never, &mu);
	return 0;
}

int main(int argc, char **argv) {
	pthread_t t[4];
	for (long i = 0; i < 4; i++)
		pthread_create(&t[i], 0, worker, (void *)i);
	static void *kept[1000];
	for (int i = 0; i < 1000; i++)
		kept[i] = malloc(48);
	for (;;) {
		pthread_mutex_lock(&mu);
		int n = parked;
		pthread_mutex_unlock(&mu);
		if (n == 4)
			break;
		usleep(1000);
	}
	FILE *f = fopen(argv[1], "w");
	fclose(f);
	for (long i = 0;; i++) {
		void *p[10];
		for (int j = 0; j < 10; j++)
			p[j] = malloc(200);
		step(i);
		for (int j = 0; j < 10; j++)
			free(p[j]);
		usleep(200);
	}
}
