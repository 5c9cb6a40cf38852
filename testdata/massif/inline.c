/* inline.c: compiled with -O2 so that fill_slot is inlined into
 * load_slots; massif then prints two frames (fill_slot and load_slots) with
 * the same address. Each of the 3 slots holds exactly 64 bytes. */
#include <stdlib.h>

void *volatile slots[3];

static inline __attribute__((always_inline)) void fill_slot(int i)
{
	slots[i] = malloc(64);
}

__attribute__((noinline)) void load_slots(void)
{
	for (int i = 0; i < 3; i++)
		fill_slot(i);
}

int main(void)
{
	load_slots();
	return 0;
}
