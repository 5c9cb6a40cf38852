// stops.c: the benchmark's target. It calls f argv[1] times (default 1500);
// a breakpoint on f stops it that many times. f allocates nothing, so the
// cost measured is the stop, the snapshot and the continue, not massif's
// bookkeeping of a growing heap.
#include <stdlib.h>

volatile int sink;

void f(int i)
{
	sink = i;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1500;
	for (int i = 0; i < n; i++)
		f(i);
	return 0;
}
