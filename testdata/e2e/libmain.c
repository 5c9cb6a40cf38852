// libmain.c: a program whose work happens in libraries: it links
// libkeep.c and loads the plugin argv[1] with dlopen(), then calls each
// argv[2] times (default 3).
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

void lib_entry(int id);

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int n = argc > 2 ? atoi(argv[2]) : 3;
	void *h = dlopen(argv[1], RTLD_NOW);
	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	void (*plugin_entry)(int) = (void (*)(int))dlsym(h, "plugin_entry");
	for (int i = 0; i < n; i++) {
		lib_entry(i);
		plugin_entry(i);
	}
	return 0;
}
