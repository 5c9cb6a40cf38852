#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
	void *p = malloc(64);
	if (argc > 1)
		sleep(atoi(argv[1]));
	free(p);
	return 0;
}
