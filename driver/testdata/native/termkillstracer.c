// A program whose SIGTERM handler kills its tracer: tick() every 10 ms,
// and at SIGTERM (passed on by gdb, which stops at it first) a SIGKILL to
// the TracerPid of /proc/self/status, then exit. Under gdb, which traces
// the program it starts with PTRACE_O_EXITKILL, the program dies with
// its gdb. It stands for gdb 13 dying of an internal error as snapctl's
// SIGTERM ends a threaded program (docs/facts.md, fact 153).
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile long ticks;

void tick(void) { ticks++; }

static void on_term(int sig) {
	(void)sig;
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof line, f)) {
		int tracer;
		if (sscanf(line, "TracerPid: %d", &tracer) == 1 && tracer > 0)
			kill(tracer, SIGKILL);
	}
	_exit(0);
}

int main(void) {
	signal(SIGTERM, on_term);
	struct timespec ms = {0, 10000000};
	for (;;) {
		tick();
		nanosleep(&ms, 0);
	}
}
