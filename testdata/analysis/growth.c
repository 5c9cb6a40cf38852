// growth.c: one "request" per loop iteration, with a heap snapshot taken at
// the start of every request through valgrind's monitor client request (the
// same `detailed_snapshot` command snapctl sends through gdb). Each request
// leaks 24 bytes in leak_record (a steady leak) and grows a scratch buffer
// that doubles its capacity during the first three requests and then stays
// put (a warm-up, not a leak). A temporary allocation is made and freed.
//
// Usage: growth DIR HITS  (writes DIR/hit-1.ms ... DIR/hit-HITS.ms)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <valgrind/valgrind.h>

static char **leaked;
static int nleaked;
static char *scratch;
static size_t scratch_cap;

static void snapshot(const char *dir, int hit) {
	char cmd[512];
	snprintf(cmd, sizeof cmd, "detailed_snapshot %s/hit-%d.ms", dir, hit);
	if (VALGRIND_MONITOR_COMMAND(cmd) != 0) {
		fprintf(stderr, "monitor command failed: %s\n", cmd);
		exit(2);
	}
}

static void leak_record(int i) {
	char *rec = malloc(24);
	snprintf(rec, 24, "request %d", i);
	leaked[nleaked++] = rec;
}

static void grow_scratch(size_t need) {
	if (need <= scratch_cap)
		return;
	while (scratch_cap < need)
		scratch_cap = scratch_cap ? scratch_cap * 2 : 64;
	scratch = realloc(scratch, scratch_cap);
}

static void handle_request(int i) {
	char *tmp = malloc(100);
	memset(tmp, 0, 100);
	leak_record(i);
	grow_scratch(i < 3 ? (size_t)64 << i : 256);
	free(tmp);
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: growth DIR HITS\n");
		return 2;
	}
	int hits = atoi(argv[2]);
	leaked = calloc(hits + 1, sizeof *leaked);
	for (int i = 0; i < hits; i++) {
		snapshot(argv[1], i + 1);
		handle_request(i);
	}
	snapshot(argv[1], hits + 1);
	return 0;
}
