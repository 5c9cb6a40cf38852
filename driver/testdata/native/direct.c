// The native backend's direct calls (agent.py's direct_call): at probe()
// the process holds three 100-byte blocks, counts SIGUSR2 in a handler,
// and has fault(), which reads address 0. After the stop it prints what
// the handler counted and whether the blocks are intact.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t handled;

static void on_usr2(int sig) {
	(void)sig;
	handled++;
}

int fault(int *p) { return *p; }

void probe(void) {}

int main(void) {
	signal(SIGUSR2, on_usr2);
	char *b[3];
	for (int i = 0; i < 3; i++) {
		b[i] = malloc(100);
		memset(b[i], 'a' + i, 100);
	}
	probe();
	int ok = 1;
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 100; j++)
			ok &= b[i][j] == 'a' + i;
	printf("handled %d intact %d\n", (int)handled, ok);
	return 0;
}
