// A program that dies of SIGSEGV as heaptrack is injected into it, while
// gdb's calls run it: a thread looks for heaptrack's library in
// /proc/self/maps every millisecond and, once it is there, raises
// SIGSEGV, whose default action ends the process. Four other threads
// allocate and free; main waits in pause().
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int injected(void) {
	FILE *maps = fopen("/proc/self/maps", "r");
	char line[512];
	int found = 0;
	if (!maps)
		return 0;
	while (!found && fgets(line, sizeof line, maps))
		found = strstr(line, "libheaptrack_inject") != 0;
	fclose(maps);
	return found;
}

static void *watch(void *arg) {
	(void)arg;
	struct timespec ms = {0, 1000000};
	while (!injected())
		nanosleep(&ms, 0);
	raise(SIGSEGV);
	return 0;
}

static void *churn(void *arg) {
	unsigned seed = (unsigned)(long)arg;
	struct timespec us = {0, 100000};
	void *kept[16] = {0};
	for (;;) {
		int i = rand_r(&seed) % 16;
		free(kept[i]);
		kept[i] = malloc(16 + rand_r(&seed) % 1024);
		nanosleep(&us, 0);
	}
	return 0;
}

int main(void) {
	pthread_t t;
	for (long i = 1; i <= 4; i++)
		pthread_create(&t, 0, churn, (void *)i);
	pthread_create(&t, 0, watch, 0);
	for (;;)
		pause();
}
