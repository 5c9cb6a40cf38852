// prog is the fixture of driver/mi's tests: a few heap allocations on the
// main thread and on a second thread, or, with the argument "spin", a loop
// that only an interrupt stops.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *keep[16];
static int nkeep;

char *grow(int n)
{
	char *p = malloc(n);
	memset(p, 'x', n);
	keep[nkeep++] = p;
	return p;
}

static void *worker(void *arg)
{
	grow(100);
	return arg;
}

int main(int argc, char **argv)
{
	pthread_t t;
	int i;

	if (argc > 1 && strcmp(argv[1], "spin") == 0)
		for (;;)
			usleep(10000);
	for (i = 0; i < 3; i++)
		grow(16 * (i + 1));
	pthread_create(&t, NULL, worker, NULL);
	pthread_join(t, NULL);
	printf("kept %d blocks\n", nkeep);
	return 0;
}
