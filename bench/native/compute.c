/* bench/native.sh's target: compute-bound, STOPS calls of checkpoint()
 * spread over about a second of arithmetic, no allocation in the loop. */
#include <stdio.h>
#include <stdlib.h>

void checkpoint(int i) { (void)i; }

int main(int argc, char **argv) {
	int stops = argc > 1 ? atoi(argv[1]) : 100;
	long work = argc > 2 ? atol(argv[2]) : 4000000;
	double x = 0;
	for (int s = 0; s < stops; s++) {
		for (long i = 0; i < work; i++)
			x += (double)(i % 7) * 0.5;
		checkpoint(s);
	}
	printf("%g\n", x);
	return 0;
}
