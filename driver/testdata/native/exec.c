// Leaks 100 blocks of 100 bytes and calls round_done, twice, then execs
// itself with "after": the new image prints "after exec", calls
// round_done (a breakpoint location in a program snapctl did not start)
// and exits with 0. With "forever" it first runs rounds every 10 ms until
// the file named by argv[2] exists, for snapctl attach.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void round_done(int r) { (void)r; }

int main(int argc, char **argv) {
	if (argc > 1 && strcmp(argv[1], "after") == 0) {
		round_done(100);
		printf("after exec\n");
		return 0;
	}
	int forever = argc > 2 && strcmp(argv[1], "forever") == 0;
	for (int r = 0; r < 2 || (forever && access(argv[2], F_OK) != 0); r++) {
		for (int i = 0; i < 100; i++) {
			volatile char *p = malloc(100);
			p[0] = 1;
		}
		round_done(r);
		if (forever)
			usleep(10000);
	}
	execl("/proc/self/exe", argv[0], "after", (char *)NULL);
	return 1;
}
