/* threshold.c: one big block and small ones, so that with massif's default
 * --threshold=1.0 the small sites fold into below-threshold lines:
 *
 *   big       100000 bytes
 *   sized      5000 bytes from main and 100 bytes from rare (the 100 fold
 *              into "in 1 place, below massif's threshold")
 *   small_a     100 bytes  \
 *   small_b     200 bytes   } fold into "600 in 3 places, all below ..."
 *   small_c     300 bytes  /
 *
 * 105700 bytes in all. */
#include <stdlib.h>

void *big(void) { return malloc(100000); }
void *sized(size_t n) { return malloc(n); }
void *small_a(void) { return malloc(100); }
void *small_b(void) { return malloc(200); }
void *small_c(void) { return malloc(300); }

static void *keep[8];

void rare(void) { keep[5] = sized(100); }

int main(void)
{
	keep[0] = big();
	keep[1] = small_a();
	keep[2] = small_b();
	keep[3] = small_c();
	keep[4] = sized(5000);
	rare();
	return 0;
}
