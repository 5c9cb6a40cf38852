/* quickexit.c: three blocks of 100 bytes before mark(), two more after
 * it, then _exit, which runs no atexit handler: heaptrack's library never
 * writes its last buffer out. */
#include <stdlib.h>
#include <unistd.h>

static void *volatile sink;

__attribute__((noinline)) void *keep(void) { return malloc(100); }
__attribute__((noinline)) void mark(void) { sink = 0; }

int main(void)
{
	for (int i = 0; i < 3; i++)
		sink = keep();
	mark();
	for (int i = 0; i < 2; i++)
		sink = keep();
	_exit(0);
}
