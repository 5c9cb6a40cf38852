// A thread that holds the lock of glibc's main arena while main hits a
// breakpoint: the holder points stderr at a full pipe and calls
// malloc_stats(), which writes to stderr inside the arena's lock and so
// blocks there. Once the holder is blocked in write(2), main calls
// work() HELD times (argument 1, default 5), allocating nothing (the
// main arena is main's); then it drains the pipe, the holder finishes
// and exits, and main calls work() FREE times more (argument 2, default
// 5), with one thread. It prints "calls N".
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int pipefd[2];
static atomic_int holder_tid, holder_done;
static int calls;

void work(int i) {
	(void)i;
	calls++;
}

static void *holder(void *arg) {
	(void)arg;
	char block[4096];
	memset(block, 'x', sizeof block);
	fcntl(pipefd[1], F_SETFL, O_NONBLOCK);
	while (write(pipefd[1], block, sizeof block) > 0 || write(pipefd[1], block, 1) > 0)
		;
	fcntl(pipefd[1], F_SETFL, 0);
	dup2(pipefd[1], 2);
	atomic_store(&holder_tid, (int)syscall(SYS_gettid));
	malloc_stats();
	atomic_store(&holder_done, 1);
	return NULL;
}

// in_write reports whether thread tid is blocked in write(2), from
// /proc without allocating (main's malloc would wait for the lock).
static int in_write(int tid) {
	char path[64], buf[64];
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	return n > 2 && buf[0] == '1' && buf[1] == ' ';
}

int main(int argc, char **argv) {
	int held = argc > 1 ? atoi(argv[1]) : 5;
	int after = argc > 2 ? atoi(argv[2]) : 5;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("start\n");
	free(malloc(100)); // main's arena is the main one
	if (pipe(pipefd) != 0)
		return 1;
	pthread_t t;
	pthread_create(&t, NULL, holder, NULL);
	while (atomic_load(&holder_tid) == 0 || !in_write(atomic_load(&holder_tid)))
		usleep(1000);
	for (int i = 0; i < held; i++)
		work(i);
	char buf[4096];
	fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
	while (!atomic_load(&holder_done)) {
		while (read(pipefd[0], buf, sizeof buf) > 0)
			;
		usleep(1000);
	}
	pthread_join(t, NULL);
	for (int i = 0; i < after; i++)
		work(held + i);
	printf("calls %d\n", calls);
	return 0;
}
