/* steady.c: a program whose heap does not change between most calls of
 * tick, for keep_snapshots: changed.
 *
 * main keeps 100 bytes, then calls tick argv[1] times (default 5); just
 * before call number argv[2] (1-based; default 0, never) it keeps 32 bytes
 * more (steady.c:grow). tick allocates nothing, so a breakpoint on it
 * with around_call sees no change within the call either. */
#include <stdlib.h>
#include <string.h>

volatile int sink;
static char *base, *more;

int tick(int i)
{
	char buf[16];
	/* A call: gdb's finish from a leaf function of one basic block
	 * overshoots the return under valgrind. */
	memset(buf, i, sizeof buf);
	return buf[3] + 1;
}

static void grow(void)
{
	more = malloc(32); /* the only change */
	memset(more, 2, 32);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 5;
	int at = argc > 2 ? atoi(argv[2]) : 0;
	base = malloc(100);
	memset(base, 1, 100);
	for (int i = 1; i <= n; i++) {
		if (i == at)
			grow();
		sink = tick(i); /* a use of the result: finish stops here */
	}
	return 0;
}
