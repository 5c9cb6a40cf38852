// bigheap.c: a big heap profile. It allocates one live block at each of K
// allocation sites (argv[1], default 1000, at most 10000), each reached D
// frames deep (argv[2], default 20: the site's function and D-1 frames of
// descend under it), then calls tick S times (argv[3], default 300); a
// breakpoint on tick stops it S times. Each tick adds one 32-byte block at
// site i % K, so every snapshot differs from the one before.
//
// The K site functions are distinct (site_0000 to site_9999, written by
// the macros below), so massif's tree holds K call sites, each under its
// own chain of D-1 descend frames: K x D tree lines.
#include <stdio.h>
#include <stdlib.h>

#define MAXSITES 10000

#define SITE(n) \
	__attribute__((noinline)) static void *site_##n(size_t size) { return malloc(size); }
#define PTR(n) site_##n,
#define X1(m, p) m(p##0) m(p##1) m(p##2) m(p##3) m(p##4) m(p##5) m(p##6) m(p##7) m(p##8) m(p##9)
#define X2(m, p) X1(m, p##0) X1(m, p##1) X1(m, p##2) X1(m, p##3) X1(m, p##4) \
	X1(m, p##5) X1(m, p##6) X1(m, p##7) X1(m, p##8) X1(m, p##9)
#define X3(m, p) X2(m, p##0) X2(m, p##1) X2(m, p##2) X2(m, p##3) X2(m, p##4) \
	X2(m, p##5) X2(m, p##6) X2(m, p##7) X2(m, p##8) X2(m, p##9)
#define X4(m) X3(m, 0) X3(m, 1) X3(m, 2) X3(m, 3) X3(m, 4) \
	X3(m, 5) X3(m, 6) X3(m, 7) X3(m, 8) X3(m, 9)

X4(SITE)

static void *(*const sites[MAXSITES])(size_t) = {X4(PTR)};

// descend calls site k at the bottom of depth-1 frames of itself.
__attribute__((noinline)) static void *descend(int depth, int k, size_t size)
{
	if (depth <= 1)
		return sites[k](size);
	void *p = descend(depth - 1, k, size);
	return p;
}

static void **live;
static size_t nlive;

void tick(int i, int k, int depth)
{
	live[nlive++] = descend(depth, i % k, 32);
}

int main(int argc, char **argv)
{
	int k = argc > 1 ? atoi(argv[1]) : 1000;
	int depth = argc > 2 ? atoi(argv[2]) : 20;
	int stops = argc > 3 ? atoi(argv[3]) : 300;
	if (k < 1 || k > MAXSITES || depth < 1 || depth > 200 || stops < 0) {
		fprintf(stderr, "usage: bigheap [SITES<=%d [DEPTH [STOPS]]]\n", MAXSITES);
		return 2;
	}
	live = malloc((size_t)(k + stops) * sizeof *live);
	for (int s = 0; s < k; s++)
		live[nlive++] = descend(depth - 1, s, 16 + s % 64);
	for (int i = 0; i < stops; i++)
		tick(i, k, depth - 1);
	for (size_t j = 0; j < nlive; j++)
		free(live[j]);
	free(live);
	return 0;
}
