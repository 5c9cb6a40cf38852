// aroundmt.c: two threads call work() 50 times each; work keeps 32 bytes
// and sleeps 2 ms, so that under around_call the other thread hits the
// breakpoint while the first one's call runs.
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static void *kept[1024];
static int n;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

void work(int i)
{
	void *p = malloc(32); // 32 bytes per call
	struct timespec ts = {0, 2000000};
	nanosleep(&ts, NULL);
	pthread_mutex_lock(&mu);
	kept[n++ % 1024] = p;
	pthread_mutex_unlock(&mu);
	(void)i;
}

static void *loop(void *arg)
{
	for (int i = 0; i < 50; i++)
		work(i);
	return arg;
}

int main(void)
{
	pthread_t a, b;
	pthread_create(&a, NULL, loop, NULL);
	pthread_create(&b, NULL, loop, NULL);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	return 0;
}
