// Leaks N blocks of 100 bytes per round (N from argv[1]) and calls
// round_done after each round: glibc's in-use heap grows by exactly N
// chunks of 112 bytes (100 + 8 rounded up to 16) per round.
#include <stdlib.h>

void round_done(int r) { (void)r; }

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 100;
	for (int r = 0; r < 6; r++) {
		for (int i = 0; i < n; i++) {
			volatile char *p = malloc(100);
			p[0] = 1;
		}
		round_done(r);
	}
	return 0;
}
