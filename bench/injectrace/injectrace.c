// bench/injectrace: heaptrack's injection into a process whose threads
// allocate, without gdb. Each try forks a child that starts four threads
// freeing and allocating without a pause, dlopens libheaptrack_inject.so
// and calls heaptrack_inject("/dev/null"), as `heaptrack -p` has gdb do.
// heaptrack hooks the allocation functions, then sets libunwind's cache
// up, and that setup maps the cache anew without libunwind's lock while
// the hooked threads unwind through it (docs/facts.md, fact 151).
// With "preset", the child first makes the calls snapctl makes before
// heaptrack_inject (heaptrack.InjectCommands): libunwind's caching policy
// and its cache size, twice. It prints how many children died of SIGSEGV.
//
// Usage: injectrace TRIES [preset]
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *churn(void *arg) {
	unsigned seed = (unsigned)(long)arg;
	void *kept[64] = {0};
	for (;;) {
		int i = rand_r(&seed) % 64;
		free(kept[i]);
		kept[i] = malloc(16 + rand_r(&seed) % 4000);
	}
	return 0;
}

static void try_injection(const char *lib, int preset, int k) {
	pthread_t t;
	for (long i = 1; i <= 4; i++)
		pthread_create(&t, 0, churn, (void *)(i + 10L * k));
	usleep(2000);
	void *h = dlopen(lib, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		_exit(3);
	}
	if (preset) {
		void **space = dlsym(h, "_ULx86_64_local_addr_space");
		int (*policy)(void *, int) = (int (*)(void *, int))dlsym(h, "_ULx86_64_set_caching_policy");
		int (*size)(void *, size_t, int) = (int (*)(void *, size_t, int))dlsym(h, "_ULx86_64_set_cache_size");
		if (!space || !policy || !size || policy(*space, 2) || size(*space, 1024, 0) || size(*space, 1024, 0))
			_exit(4);
	}
	void (*inject)(const char *) = (void (*)(const char *))dlsym(h, "heaptrack_inject");
	inject("/dev/null");
	usleep(20000);
	_exit(0);
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: injectrace TRIES [preset]\n");
		return 2;
	}
	const char *lib = getenv("HEAPTRACK_INJECT");
	if (!lib)
		lib = "/usr/lib/heaptrack/libheaptrack_inject.so";
	int tries = atoi(argv[1]), preset = argc > 2 && strcmp(argv[2], "preset") == 0;
	int segv = 0, other = 0;
	for (int k = 0; k < tries; k++) {
		pid_t pid = fork();
		if (pid == 0)
			try_injection(lib, preset, k);
		int st;
		waitpid(pid, &st, 0);
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV)
			segv++;
		else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			other++;
	}
	printf("%-7s %d of %d died of SIGSEGV, %d otherwise\n", preset ? "preset" : "plain", segv, tries, other);
	return 0;
}
