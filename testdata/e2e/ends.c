// ends.c: a program that ends in a way a run must report as it is.
// argv[1] picks how, after two requests that leak 24 bytes each:
//
//   exit CODE   call leave(CODE), which allocates 100 bytes and calls
//               exit(CODE) from inside the call
//   exec        replace itself with `sleep 2` (valgrind follows exec only
//               with --trace-children=yes)
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *kept[4];

void handle_request(int id)
{
	kept[id] = malloc(24); // the leak: 24 bytes per request
}

void leave(int code)
{
	kept[3] = malloc(100);
	exit(code); // leave never returns
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "exit";
	handle_request(0);
	handle_request(1);
	if (strcmp(mode, "exec") == 0) {
		execl("/bin/sleep", "sleep", "2", (char *)NULL);
		return 99; // exec failed
	}
	leave(argc > 2 ? atoi(argv[2]) : 0);
	return 0;
}
