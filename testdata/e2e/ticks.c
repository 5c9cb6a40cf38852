// ticks.c: calls tick() argv[1] times (default 50), each keeping 16
// bytes, then blocks in pause() forever: a program whose run ends only
// when snapctl ends it.
#include <stdlib.h>
#include <unistd.h>

static void *kept[4096];

void tick(int i)
{
	kept[i % 4096] = malloc(16); // 16 bytes per tick
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 50;
	for (int i = 0; i < n; i++)
		tick(i);
	for (;;)
		pause();
}
