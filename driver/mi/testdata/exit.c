// exit ends with the status given as its argument, or with SIGSEGV when the
// argument is "segv": how gdb reports a target's end through vgdb.
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "segv") == 0)
		*(volatile int *)0 = 1;
	return argc > 1 ? atoi(argv[1]) : 0;
}
