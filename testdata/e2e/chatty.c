// chatty.c: a request loop that prints a line to stdout for every request
// and one to stderr for every tenth, and leaks 32 bytes per request.
//
// It is the target of the terminal tests: its lines must reach the
// terminal whole, never glued to snapctl's status line. Each request
// sleeps 20 ms so the status line is drawn between the lines. The number
// of requests is argv[1] (default 30). The last line has no newline.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *kept[1024];

void handle_request(int id)
{
	kept[id % 1024] = malloc(32); // the leak: 32 bytes per request
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 30;
	for (int i = 0; i < n; i++) {
		handle_request(i);
		printf("request %d done\n", i);
		if (i % 10 == 0)
			fprintf(stderr, "note: %d requests\n", i);
		usleep(20000);
	}
	printf("served %d requests", n);
	return 0;
}
