// Forks once per round. The child allocates 1000 blocks of 100 bytes,
// reaches round_done itself and exits with status 7; the parent waits for
// it, leaks 100 blocks of 100 bytes (100 chunks of 112 bytes) and calls
// round_done. A child that does not exit with 7 (stopped, or killed by the
// SIGTRAP of a breakpoint left in its copy of the code) makes the parent
// exit with 1. With "spawn", each round also runs a command through
// system() (posix_spawn: a vfork), which must exit with 3. With "forever"
// it runs rounds every 10 ms until killed, for snapctl attach.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void round_done(int r) { (void)r; }

static int child(void) {
	for (int i = 0; i < 1000; i++) {
		volatile char *p = malloc(100);
		p[0] = 1;
	}
	round_done(-1);
	printf("child %d done\n", (int)getpid());
	fflush(stdout);
	return 7;
}

int main(int argc, char **argv) {
	int spawn = argc > 1 && strcmp(argv[1], "spawn") == 0;
	int forever = argc > 1 && strcmp(argv[1], "forever") == 0;
	for (int r = 0; forever || r < 4; r++) {
		pid_t pid = fork();
		if (pid < 0)
			return 2;
		if (pid == 0)
			exit(child());
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 7) {
			fprintf(stderr, "child %d: status %#x\n", (int)pid, st);
			return 1;
		}
		if (spawn) {
			int rc = system("exit 3");
			if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 3) {
				fprintf(stderr, "system: status %#x\n", rc);
				return 1;
			}
		}
		for (int i = 0; i < 100; i++) {
			volatile char *p = malloc(100);
			p[0] = 1;
		}
		round_done(r);
		if (forever)
			usleep(10000);
	}
	return 0;
}
