/* stripped.c: each round keeps a block of 100 bytes from pool_get, an
 * allocation wrapper with a single caller (keep_item), and a copy of a
 * 16-character name from strdup (keep_name), then calls getpid. Before
 * its second round it loads PLUGIN (ctor.c) with dlopen, whose
 * constructor keeps 40 bytes, and calls its plugin_tick every round
 * from then on. ROUNDS 0 runs until killed, a round every
 * 20 ms. Tests run it as built and stripped. Usage: stripped ROUNDS [PLUGIN] */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *volatile sink;

__attribute__((noinline)) void *pool_get(size_t size) { return malloc(size); /* pool */ }
__attribute__((noinline)) void keep_item(void) { sink = pool_get(100); /* item */ }
__attribute__((noinline)) void keep_name(void) { sink = strdup("0123456789abcdef"); /* name */ }

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 5;
	void (*tick)(int) = NULL;
	for (int i = 0; rounds == 0 || i < rounds; i++) {
		if (i == 1 && argc > 2) {
			void *lib = dlopen(argv[2], RTLD_NOW);
			if (!lib) {
				fprintf(stderr, "%s\n", dlerror());
				return 1;
			}
			tick = (void (*)(int))dlsym(lib, "plugin_tick");
		}
		if (tick)
			tick(i);
		keep_item();
		keep_name();
		getpid();
		if (rounds == 0) {
			struct timespec ts = {0, 20 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
	return 0;
}
