// callwait.c: a function that returns only once another thread has run
// (wait_turn) and one that never returns (forever), for the calls
// snapctl makes into a process with ptrace when gdb is gone
// (driver/backend/native/rescue.go). Prints "ready" once its worker
// thread runs.
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

volatile int turn;

void wait_turn(void)
{
	int seen = turn;
	while (turn == seen)
		usleep(1000);
}

void forever(void)
{
	for (;;)
		usleep(1000);
}

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		turn++;
		usleep(2000);
	}
	return NULL;
}

int main(void)
{
	pthread_t t;
	pthread_create(&t, NULL, worker, NULL);
	while (turn == 0)
		usleep(1000);
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
