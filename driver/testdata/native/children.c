// Leaves two processes behind: a child that sleeps in the program's
// process group, and a daemon (a grandchild in a session of its own, as
// daemon() makes one). It writes their pids to argv[1], reaches
// round_done once and exits; each sleeps for argv[2] seconds (60 unless
// given), then exits.
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

void round_done(int r) { (void)r; }

int main(int argc, char **argv) {
	if (argc < 2)
		return 2;
	unsigned secs = argc > 2 ? (unsigned)atoi(argv[2]) : 60;
	int fds[2];
	if (pipe(fds) != 0)
		return 1;
	pid_t child = fork();
	if (child == 0) {
		sleep(secs);
		_exit(0);
	}
	pid_t mid = fork();
	if (mid == 0) {
		setsid();
		pid_t daemon = fork();
		if (daemon == 0) {
			sleep(secs);
			_exit(0);
		}
		if (write(fds[1], &daemon, sizeof daemon) != sizeof daemon)
			_exit(1);
		_exit(0);
	}
	pid_t daemon;
	waitpid(mid, NULL, 0);
	if (read(fds[0], &daemon, sizeof daemon) != sizeof daemon)
		return 1;
	FILE *f = fopen(argv[1], "w");
	if (f == NULL || fprintf(f, "%d %d\n", (int)child, (int)daemon) < 0 || fclose(f) != 0)
		return 1;
	round_done(0);
	return 0;
}
