// A program that ignores SIGTERM: tick() ten times, then it waits for
// signals forever. Ended by snapctl (end_run_after), it outlives the
// SIGTERM and dies of the SIGKILL that follows.
#include <signal.h>
#include <unistd.h>

static volatile long ticks;

void tick(void) { ticks++; }

int main(void) {
	signal(SIGTERM, SIG_IGN);
	for (int i = 0; i < 10; i++)
		tick();
	for (;;)
		pause();
}
