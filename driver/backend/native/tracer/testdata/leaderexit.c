/* leaderexit.c: the main thread starts a worker and ends with
 * pthread_exit; the process lives on in the worker, its main
 * thread a zombie until the worker ends (on SIGTERM, or after 60 s). */
#include <pthread.h>
#include <unistd.h>

static void *worker(void *arg) {
	sleep(60);
	return arg;
}

int main(void) {
	pthread_t t;
	if (pthread_create(&t, 0, worker, 0))
		return 1;
	pthread_exit(0);
}
