/* bench/sites.sh's peak-memory target: N allocations (default
 * 10,000,000) of 16 to 1,039 bytes from four call sites, most freed
 * soon after (a ring of 4,096 live blocks), and checkpoint() after every
 * N/STOPS of them (STOPS default 10), where the plan breaks. Each
 * checkpoint leaks one 64-byte block, so the live blocks stay few: the
 * memory snapctl needs is for the stream of events, not for what the
 * program holds. */
#include <stdlib.h>
#include <string.h>

#define RING 4096

void checkpoint(int i) { (void)i; }

static void *site_a(size_t n) { return malloc(n); }
static void *site_b(size_t n) { return calloc(1, n); }
static void *site_c(size_t n) { return malloc(n); }
static void *site_d(size_t n) { return realloc(NULL, n); }

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 10000000;
	int stops = argc > 2 ? atoi(argv[2]) : 10;
	static void *ring[RING];
	unsigned seed = 1;
	long per = n / stops;
	for (long i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		size_t size = 16 + (seed >> 8) % 1024;
		void *p;
		switch ((seed >> 20) & 3) {
		case 0: p = site_a(size); break;
		case 1: p = site_b(size); break;
		case 2: p = site_c(size); break;
		default: p = site_d(size); break;
		}
		memset(p, 1, 16);
		free(ring[i % RING]);
		ring[i % RING] = p;
		if ((i + 1) % per == 0) {
			void *leak = malloc(64);
			memset(leak, 2, 64);
			checkpoint((int)((i + 1) / per));
		}
	}
	for (int i = 0; i < RING; i++)
		free(ring[i]);
	return 0;
}
