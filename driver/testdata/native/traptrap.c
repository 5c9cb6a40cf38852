/* traptrap: snapctl's SIGTRAP handler (driver/backend/native/trap.go)
 * against a tracer that dies without collecting a trap.
 *
 * Usage: traptrap CODE TABLE MODE
 *   CODE   a file holding the handler's machine code
 *   TABLE  the offset of its table in the page (hex)
 *   MODE   "armed": a thread runs into an int3 at a function's first byte;
 *          its tracer, which never waits for it, puts the byte back,
 *          arms the table with the address and dies;
 *          "unarmed": the same without arming the table;
 *          "step": its tracer sets a single step, arms the table with
 *          no address and dies.
 *
 * The program (the main process) forks the traced child and the tracer.
 * The child maps the page, installs the handler and calls the function
 * in a loop; it exits 0 after printing "survived N" once the tracer is
 * gone and it has made 1000 more calls. The main process prints how the
 * child ended: "exit N" or "signal N".
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 0x2000
#define FN 0x1800 /* the function: nop; mov eax, 42; ret */

static unsigned char *page;

static char state(pid_t pid) {
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	return p && p[1] ? p[2] : 0;
}

static void poke(pid_t pid, uintptr_t addr, const void *data, size_t n) {
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/mem", pid);
	int fd = open(path, O_RDWR);
	if (fd < 0 || pwrite(fd, data, n, addr) != (ssize_t)n) {
		perror("writing the child's memory");
		_exit(3);
	}
	close(fd);
}

int main(int argc, char **argv) {
	if (argc != 4)
		return 2;
	unsigned long table = strtoul(argv[2], NULL, 16);
	const char *mode = argv[3];
	page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return 2;
	FILE *f = fopen(argv[1], "rb");
	if (!f || fread(page, 1, FN, f) == 0)
		return 2;
	fclose(f);
	memcpy(page + FN, "\x90\xb8\x2a\x00\x00\x00\xc3", 7);
	volatile int *gone = (volatile int *)(page + 0x1f00);
	/* Set by the child once its handler is in and it calls the function. */
	volatile int *running = (volatile int *)(page + 0x1f04);
	int go[2];
	if (pipe(go))
		return 2;
	fflush(stdout);
	pid_t child = fork();
	if (child == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = (void (*)(int, siginfo_t *, void *))page;
		sa.sa_flags = SA_SIGINFO;
		sigaction(SIGTRAP, &sa, NULL);
		char c;
		if (read(go[0], &c, 1) != 1)
			_exit(2);
		int (*fn)(void) = (int (*)(void))(page + FN);
		int sum = 0;
		*running = 1;
		for (long i = 0; !*gone; i++)
			sum = fn();
		for (int i = 0; i < 1000; i++)
			sum = fn();
		printf("survived %d\n", sum);
		fflush(stdout);
		_exit(0);
	}
	pid_t tracer = fork();
	if (tracer == 0) {
		if (ptrace(PTRACE_SEIZE, child, 0, 0) != 0) {
			perror("PTRACE_SEIZE");
			_exit(3);
		}
		uintptr_t fn = (uintptr_t)(page + FN);
		if (strcmp(mode, "step") == 0) {
			if (write(go[1], "x", 1) != 1)
				_exit(3);
			/* The step must come in the loop, with the handler in: on a
			 * loaded machine the child may not have run at all yet. */
			while (!*running)
				usleep(1000);
			int ws;
			ptrace(PTRACE_INTERRUPT, child, 0, 0);
			waitpid(child, &ws, __WALL);
			ptrace(PTRACE_SINGLESTEP, child, 0, 0);
			uint64_t t[2] = {1, 0}; /* armed, no address */
			poke(child, (uintptr_t)page + table, t, sizeof t);
		} else {
			unsigned char bp = 0xcc;
			poke(child, fn, &bp, 1);
			if (write(go[1], "x", 1) != 1)
				_exit(3);
			/* The child's trap stop, which this tracer never collects. */
			while (state(child) != 't')
				usleep(1000);
			unsigned char orig = 0x90;
			poke(child, fn, &orig, 1);
			if (strcmp(mode, "armed") == 0) {
				uint64_t t[3] = {1, 1, fn};
				poke(child, (uintptr_t)page + table, t, sizeof t);
			}
		}
		*gone = 1;
		_exit(0);
	}
	int ws;
	waitpid(tracer, &ws, 0);
	if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
		printf("tracer failed\n");
		kill(child, SIGKILL);
		waitpid(child, &ws, 0);
		return 1;
	}
	waitpid(child, &ws, 0);
	if (WIFSIGNALED(ws))
		printf("signal %d\n", WTERMSIG(ws));
	else
		printf("exit %d\n", WEXITSTATUS(ws));
	return 0;
}
