// A program built without PIE (gcc -no-pie) that takes the address of
// malloc and free, as Debian's python3 does in its allocator table: the
// address of each is then the program's own PLT entry. Three threads
// allocate through the table until the program is killed; it writes
// "ready" to stdout once they run.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct allocator {
	void *(*alloc)(size_t);
	void (*release)(void *);
};
static struct allocator raw;

static void *worker(void *arg) {
	(void)arg;
	for (;;) {
		void *p = raw.alloc(64);
		raw.release(p);
		usleep(1000);
	}
	return NULL;
}

int main(void) {
	// Taken in the program's code: the linker makes the program's PLT
	// entries the functions' addresses.
	raw.alloc = malloc;
	raw.release = free;
	for (int i = 0; i < 3; i++) {
		pthread_t t;
		pthread_create(&t, NULL, worker, NULL);
	}
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
