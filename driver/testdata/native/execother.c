// Calls round_done four times, then execs the program named by argv[1]
// (a program without round_done, such as /bin/true). never_called is
// never called.
#include <unistd.h>

void round_done(int r) { (void)r; }
void never_called(void) {}

int main(int argc, char **argv) {
	for (int r = 0; r < 4; r++)
		round_done(r);
	if (argc > 1)
		execv(argv[1], argv + 1);
	return 1;
}
