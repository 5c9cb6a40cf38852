// stops.c: the benchmark's target. It calls f argv[1] times (default 1500);
// a breakpoint on f stops it that many times. f allocates nothing, so the
// cost measured is the stop, the snapshot and the continue, not massif's
// bookkeeping of a growing heap. With a second argument "leak", f leaks
// 16 bytes at every call: one call site that grows at every stop, as a
// leak snapctl is run to find does (bench/large.sh --leak). A count of -1
// calls f until the program is killed, one call every 50 us, for `snapctl
// attach` (bench/large.sh's attach paths): a process that waits to be
// attached without leaking gigabytes meanwhile.
#include <stdlib.h>
#include <string.h>
#include <time.h>

volatile int sink;
static int leak;
static void *kept;

void f(int i)
{
	sink = i;
	if (leak) {
		void **p = malloc(16);
		*p = kept;
		kept = p;
	}
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1500;
	leak = argc > 2 && strcmp(argv[2], "leak") == 0;
	if (n < 0) {
		struct timespec pause = {0, 50000};
		for (int i = 0;; i++) {
			f(i);
			nanosleep(&pause, NULL);
		}
	}
	for (int i = 0; i < n; i++)
		f(i);
	return 0;
}
