// A long-running process for snapctl attach: tick() once every 10 ms,
// leaking 100 bytes each time, until it is killed. With "undumpable" it
// first makes itself not dumpable (prctl(PR_SET_DUMPABLE, 0)): only a
// tracer with CAP_SYS_PTRACE may then attach to it.
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

void tick(int i) { (void)i; }

int main(int argc, char **argv) {
	if (argc > 1 && strcmp(argv[1], "undumpable") == 0)
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	for (int i = 0;; i++) {
		volatile char *p = malloc(100);
		p[0] = 1;
		tick(i);
		usleep(10000);
	}
}
