// faults.c: a request loop that misbehaves on demand, for the
// fault-injection tests. argv[1] picks what happens after argv[2] requests
// (default 3), each of which leaks 24 bytes in handle_request:
//
//   exit    return 0
//   segv    write through a null pointer in crash_here (SIGSEGV)
//   abort   call abort() in abort_here (SIGABRT)
//   hang    call stuck(), which blocks in pause() forever
//   fork    fork; the child handles argv[2] requests of its own and exits,
//           the parent waits for it and handles one more
//   slow    sleep 200 ms before each request (for faults "while running")
//   daemon  daemon(): the parent exits 0 and the child, in a session of
//           its own, sleeps for two minutes
//   gate    wait until the file argv[3] exists, then return 0: a target
//           that exits when the test says, however slow the machine
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *kept[1024];
static int served;

void handle_request(int id)
{
	kept[served++ % 1024] = malloc(24); // the leak: 24 bytes per request
	(void)id;
}

void crash_here(void)
{
	volatile int *p = NULL;
	*p = 1; // SIGSEGV here
}

void abort_here(void)
{
	abort(); // SIGABRT here
}

void stuck(void)
{
	for (;;)
		pause(); // blocks forever
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "exit";
	int n = argc > 2 ? atoi(argv[2]) : 3;
	int slow = strcmp(mode, "slow") == 0;
	for (int i = 0; i < n; i++) {
		if (slow) {
			struct timespec ts = {0, 200000000};
			nanosleep(&ts, NULL);
		}
		handle_request(i);
	}
	if (strcmp(mode, "segv") == 0)
		crash_here();
	else if (strcmp(mode, "abort") == 0)
		abort_here();
	else if (strcmp(mode, "hang") == 0)
		stuck();
	else if (strcmp(mode, "daemon") == 0) {
		if (daemon(0, 0) != 0)
			return 1;
		sleep(120);
	} else if (strcmp(mode, "gate") == 0) {
		struct timespec ts = {0, 10000000};
		while (argc > 3 && access(argv[3], F_OK) != 0)
			nanosleep(&ts, NULL);
	} else if (strcmp(mode, "fork") == 0) {
		pid_t pid = fork();
		if (pid == 0) {
			for (int i = 0; i < n; i++)
				handle_request(100 + i);
			_exit(0);
		}
		int status;
		waitpid(pid, &status, 0);
		handle_request(n);
	}
	return 0;
}
