/* dlhost.c: loads the library LIB with dlopen, runs ROUNDS of its
 * plugin_round, unloads it and keeps one block of 64 bytes from
 * host_alloc. Usage: dlhost LIB ROUNDS */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static void *volatile sink;

__attribute__((noinline)) void *host_alloc(void) { return malloc(64); }
__attribute__((noinline)) void host_done(void) { sink = 0; }

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	void *lib = dlopen(argv[1], RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	void (*round)(int) = (void (*)(int))dlsym(lib, "plugin_round");
	for (int i = 0; i < atoi(argv[2]); i++)
		round(i);
	dlclose(lib);
	sink = host_alloc();
	host_done();
	return 0;
}
