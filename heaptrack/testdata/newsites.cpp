// newsites.cpp: blocks leaked through operator new and new[], one more of
// each before every stop at step(i): after i+1 steps, make_item holds
// i+1 blocks of 40 bytes, make_array i+1 arrays of 4 * (10 + j) bytes.
// Usage: newsites STEPS
#include <cstdlib>

struct Item {
	char data[40];
};

static void *volatile sink;

__attribute__((noinline)) Item *make_item() { return new Item; }
__attribute__((noinline)) int *make_array(int n) { return new int[n]; }
__attribute__((noinline)) void step(int i) { sink = (void *)(long)i; }

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 3;
	for (int i = 0; i < steps; i++) {
		sink = make_item();
		sink = make_array(10 + i);
		step(i);
	}
	return 0;
}
