// threshold.c: a small allocation site that massif shows at the first
// snapshot and folds into its below-threshold bucket at the second, after a
// big allocation has grown the heap a hundredfold. Run it with massif's
// default --threshold (1%).
//
// Usage: threshold DIR  (writes DIR/before.ms and DIR/after.ms)
#include <stdio.h>
#include <stdlib.h>
#include <valgrind/valgrind.h>

static void snapshot(const char *dir, const char *name) {
	char cmd[512];
	snprintf(cmd, sizeof cmd, "detailed_snapshot %s/%s.ms", dir, name);
	if (VALGRIND_MONITOR_COMMAND(cmd) != 0) {
		fprintf(stderr, "monitor command failed: %s\n", cmd);
		exit(2);
	}
}

static char *small_site(void) { return malloc(200); }

static char *big_site(size_t n) { return malloc(n); }

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: threshold DIR\n");
		return 2;
	}
	char *small = small_site();
	char *big = big_site(2000);
	snapshot(argv[1], "before");
	free(big);
	big = big_site(200000);
	snapshot(argv[1], "after");
	free(big);
	free(small);
	return 0;
}
