/* avx512.c: a program valgrind cannot run: every round adds vectors with
 * AVX-512 instructions (valgrind 3.19 decodes none of them, and stops the
 * program with SIGILL at the first), then
 *   keep_lanes: malloc(640), kept, filled with 512-bit stores -> 1 block, 640 bytes
 *   scratch: malloc(4096), freed at once                       -> nothing
 * After round r (0-based), main calls round_done(r).
 * Built with -mavx512f; it runs only on a CPU with avx512f.
 * Usage: avx512 ROUNDS */
#include <immintrin.h>
#include <stdlib.h>

#define LANES 10 /* 10 vectors of 64 bytes: 640 bytes */

static void *volatile sink;
static volatile float total;

__attribute__((noinline)) float mix(const float *in, int n)
{
	__m512 acc = _mm512_setzero_ps();
	for (int i = 0; i + 16 <= n; i += 16)
		acc = _mm512_add_ps(acc, _mm512_loadu_ps(in + i));
	return _mm512_reduce_add_ps(acc);
}

__attribute__((noinline)) void *keep_lanes(int r)
{
	float *p = malloc(LANES * sizeof(__m512));
	for (int i = 0; i < LANES; i++)
		_mm512_storeu_ps(p + 16 * i, _mm512_set1_ps((float)(r + i)));
	return p;
}

__attribute__((noinline)) void scratch(void)
{
	float *p = malloc(4096);
	for (int i = 0; i < 4096 / 64; i++)
		_mm512_storeu_ps(p + 16 * i, _mm512_set1_ps(1.0f));
	total += mix(p, 4096 / sizeof(float));
	free(p);
}

__attribute__((noinline)) void round_done(int r) { sink = (void *)(long)r; }

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 3;
	for (int r = 0; r < rounds; r++) {
		float *kept = keep_lanes(r);
		total += mix(kept, LANES * 16);
		sink = kept;
		scratch();
		round_done(r);
	}
	return 0;
}
