// A long-running process for snapctl attach: tick() once every 10 ms,
// leaking 100 bytes each time, until it is killed.
#include <stdlib.h>
#include <unistd.h>

void tick(int i) { (void)i; }

int main(void) {
	for (int i = 0;; i++) {
		volatile char *p = malloc(100);
		p[0] = 1;
		tick(i);
		usleep(10000);
	}
}
