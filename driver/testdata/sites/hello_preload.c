// A library for LD_PRELOAD that says, on stdout, which program loaded it.
#include <stdio.h>
#include <string.h>

__attribute__((constructor)) static void hello(void) {
	char comm[64] = "";
	FILE *f = fopen("/proc/self/comm", "r");
	if (f) {
		if (fgets(comm, sizeof comm, f))
			comm[strcspn(comm, "\n")] = 0;
		fclose(f);
	}
	printf("preloaded into %s\n", comm);
	fflush(stdout);
}
