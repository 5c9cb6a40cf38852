// gdb's calls at a stop where the stopped thread's vector and general
// registers are live. main loads known values into ymm0-15 (xmm0-15
// without AVX) and the caller-saved general registers and stops at the
// label probe; the code after it stores them and compares. Meanwhile a
// raiser thread raises SIGUSR1 every 5 ms (gdb stops at it and passes it
// on), three workers allocate and free, and a spawner starts a thread
// that exits every 20 ms. The functions gdb calls overwrite every vector
// register: clobber() returns 7 at once; clobber_slow() returns 8 once
// two signals have come (gdb gives it up and it runs on); clobber_stuck()
// waits until release is set. main writes "intact" or what changed to
// the file argv[1], calls checked(), and exits 0, or 3 when a register
// changed.
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct {
	unsigned char in[16][64];   // 0
	unsigned char out[16][64];  // 1024
	unsigned long gin[8];       // 2048
	unsigned long gout[8];      // 2112
} regs;

static volatile int raised, release, slow_returns;
static long avx;

static void wipe(void) {
	if (avx)
		__asm__ volatile(
		    "vpcmpeqb %%ymm0, %%ymm0, %%ymm0\n\tvmovdqa %%ymm0, %%ymm1\n\tvmovdqa %%ymm0, %%ymm2\n\tvmovdqa %%ymm0, %%ymm3\n\t"
		    "vmovdqa %%ymm0, %%ymm4\n\tvmovdqa %%ymm0, %%ymm5\n\tvmovdqa %%ymm0, %%ymm6\n\tvmovdqa %%ymm0, %%ymm7\n\t"
		    "vmovdqa %%ymm0, %%ymm8\n\tvmovdqa %%ymm0, %%ymm9\n\tvmovdqa %%ymm0, %%ymm10\n\tvmovdqa %%ymm0, %%ymm11\n\t"
		    "vmovdqa %%ymm0, %%ymm12\n\tvmovdqa %%ymm0, %%ymm13\n\tvmovdqa %%ymm0, %%ymm14\n\tvmovdqa %%ymm0, %%ymm15\n\t" ::
			: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
			  "xmm13", "xmm14", "xmm15");
	else
		__asm__ volatile(
		    "pcmpeqb %%xmm0, %%xmm0\n\tmovdqa %%xmm0, %%xmm1\n\tmovdqa %%xmm0, %%xmm2\n\tmovdqa %%xmm0, %%xmm3\n\t"
		    "movdqa %%xmm0, %%xmm4\n\tmovdqa %%xmm0, %%xmm5\n\tmovdqa %%xmm0, %%xmm6\n\tmovdqa %%xmm0, %%xmm7\n\t"
		    "movdqa %%xmm0, %%xmm8\n\tmovdqa %%xmm0, %%xmm9\n\tmovdqa %%xmm0, %%xmm10\n\tmovdqa %%xmm0, %%xmm11\n\t"
		    "movdqa %%xmm0, %%xmm12\n\tmovdqa %%xmm0, %%xmm13\n\tmovdqa %%xmm0, %%xmm14\n\tmovdqa %%xmm0, %%xmm15\n\t" ::
			: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
			  "xmm13", "xmm14", "xmm15");
}

static void wait_signals(int n) {
	int from = raised;
	struct timespec ms = {0, 1000000};
	while (raised < from + n)
		nanosleep(&ms, 0);
}

int clobber(void) {
	wipe();
	return 7;
}

int clobber_slow(void) {
	wipe();
	wait_signals(2);
	wipe();
	slow_returns++;
	return 8;
}

int clobber_stuck(void) {
	struct timespec tick = {0, 100000000};
	wipe();
	while (!release)
		nanosleep(&tick, 0);
	return 9;
}

static void on_usr1(int sig) { (void)sig; }

// checked is called once the verdict is written: gdb stops there, before
// the process ends with its threads coming and going (gdb 13 was seen to
// lose the exit so, "Cannot find user-level thread for LWP").
__attribute__((noinline)) void checked(void) { __asm__ volatile(""); }

static void *raiser(void *arg) {
	(void)arg;
	struct timespec tick = {0, 5000000};
	for (;;) {
		nanosleep(&tick, 0);
		raise(SIGUSR1);
		raised++;
	}
	return 0;
}

static void *worker(void *arg) {
	(void)arg;
	struct timespec tick = {0, 200000};
	for (unsigned n = 0;; n++) {
		free(malloc(64 + (n & 255)));
		nanosleep(&tick, 0);
	}
	return 0;
}

static void *brief(void *arg) { return arg; }

static void *spawner(void *arg) {
	(void)arg;
	struct timespec tick = {0, 20000000};
	for (;;) {
		pthread_t t;
		if (pthread_create(&t, 0, brief, 0) == 0)
			pthread_join(t, 0);
		nanosleep(&tick, 0);
	}
	return 0;
}

int main(int argc, char **argv) {
	if (argc != 2)
		return 2;
	avx = __builtin_cpu_supports("avx");
	struct sigaction sa = {0};
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, 0);
	pthread_t t;
	pthread_create(&t, 0, raiser, 0);
	for (int i = 0; i < 3; i++)
		pthread_create(&t, 0, worker, 0);
	pthread_create(&t, 0, spawner, 0);
	for (int r = 0; r < 16; r++)
		for (int b = 0; b < 64; b++)
			regs.in[r][b] = (unsigned char)(r * 64 + b + 1);
	for (int i = 0; i < 8; i++)
		regs.gin[i] = 0x0101010101010101UL * (unsigned long)(i + 1);
	__asm__ volatile(
		"mov 2048+0(%[s]), %%rcx\n\tmov 2048+8(%[s]), %%rdx\n\tmov 2048+16(%[s]), %%rsi\n\tmov 2048+24(%[s]), %%rdi\n\t"
		"mov 2048+32(%[s]), %%r8\n\tmov 2048+40(%[s]), %%r9\n\tmov 2048+48(%[s]), %%r10\n\tmov 2048+56(%[s]), %%r11\n\t"
		"cmpq $0, %[avx]\n\tjne 1f\n\t"
		"movdqu 0(%[s]), %%xmm0\n\tmovdqu 64(%[s]), %%xmm1\n\tmovdqu 128(%[s]), %%xmm2\n\tmovdqu 192(%[s]), %%xmm3\n\t"
		"movdqu 256(%[s]), %%xmm4\n\tmovdqu 320(%[s]), %%xmm5\n\tmovdqu 384(%[s]), %%xmm6\n\tmovdqu 448(%[s]), %%xmm7\n\t"
		"movdqu 512(%[s]), %%xmm8\n\tmovdqu 576(%[s]), %%xmm9\n\tmovdqu 640(%[s]), %%xmm10\n\tmovdqu 704(%[s]), %%xmm11\n\t"
		"movdqu 768(%[s]), %%xmm12\n\tmovdqu 832(%[s]), %%xmm13\n\tmovdqu 896(%[s]), %%xmm14\n\tmovdqu 960(%[s]), %%xmm15\n\t"
		"jmp 2f\n"
		"1:\n\t"
		"vmovdqu 0(%[s]), %%ymm0\n\tvmovdqu 64(%[s]), %%ymm1\n\tvmovdqu 128(%[s]), %%ymm2\n\tvmovdqu 192(%[s]), %%ymm3\n\t"
		"vmovdqu 256(%[s]), %%ymm4\n\tvmovdqu 320(%[s]), %%ymm5\n\tvmovdqu 384(%[s]), %%ymm6\n\tvmovdqu 448(%[s]), %%ymm7\n\t"
		"vmovdqu 512(%[s]), %%ymm8\n\tvmovdqu 576(%[s]), %%ymm9\n\tvmovdqu 640(%[s]), %%ymm10\n\tvmovdqu 704(%[s]), %%ymm11\n\t"
		"vmovdqu 768(%[s]), %%ymm12\n\tvmovdqu 832(%[s]), %%ymm13\n\tvmovdqu 896(%[s]), %%ymm14\n\tvmovdqu 960(%[s]), %%ymm15\n\t"
		"2:\n"
		".globl probe\n"
		"probe:\n\tnop\n\t"
		"mov %%rcx, 2112+0(%[s])\n\tmov %%rdx, 2112+8(%[s])\n\tmov %%rsi, 2112+16(%[s])\n\tmov %%rdi, 2112+24(%[s])\n\t"
		"mov %%r8, 2112+32(%[s])\n\tmov %%r9, 2112+40(%[s])\n\tmov %%r10, 2112+48(%[s])\n\tmov %%r11, 2112+56(%[s])\n\t"
		"cmpq $0, %[avx]\n\tjne 3f\n\t"
		"movdqu %%xmm0, 1024+0(%[s])\n\tmovdqu %%xmm1, 1024+64(%[s])\n\tmovdqu %%xmm2, 1024+128(%[s])\n\tmovdqu %%xmm3, 1024+192(%[s])\n\t"
		"movdqu %%xmm4, 1024+256(%[s])\n\tmovdqu %%xmm5, 1024+320(%[s])\n\tmovdqu %%xmm6, 1024+384(%[s])\n\tmovdqu %%xmm7, 1024+448(%[s])\n\t"
		"movdqu %%xmm8, 1024+512(%[s])\n\tmovdqu %%xmm9, 1024+576(%[s])\n\tmovdqu %%xmm10, 1024+640(%[s])\n\tmovdqu %%xmm11, 1024+704(%[s])\n\t"
		"movdqu %%xmm12, 1024+768(%[s])\n\tmovdqu %%xmm13, 1024+832(%[s])\n\tmovdqu %%xmm14, 1024+896(%[s])\n\tmovdqu %%xmm15, 1024+960(%[s])\n\t"
		"jmp 4f\n"
		"3:\n\t"
		"vmovdqu %%ymm0, 1024+0(%[s])\n\tvmovdqu %%ymm1, 1024+64(%[s])\n\tvmovdqu %%ymm2, 1024+128(%[s])\n\tvmovdqu %%ymm3, 1024+192(%[s])\n\t"
		"vmovdqu %%ymm4, 1024+256(%[s])\n\tvmovdqu %%ymm5, 1024+320(%[s])\n\tvmovdqu %%ymm6, 1024+384(%[s])\n\tvmovdqu %%ymm7, 1024+448(%[s])\n\t"
		"vmovdqu %%ymm8, 1024+512(%[s])\n\tvmovdqu %%ymm9, 1024+576(%[s])\n\tvmovdqu %%ymm10, 1024+640(%[s])\n\tvmovdqu %%ymm11, 1024+704(%[s])\n\t"
		"vmovdqu %%ymm12, 1024+768(%[s])\n\tvmovdqu %%ymm13, 1024+832(%[s])\n\tvmovdqu %%ymm14, 1024+896(%[s])\n\tvmovdqu %%ymm15, 1024+960(%[s])\n\t"
		"4:\n"
		:
		: [s] "r"(&regs), [avx] "m"(avx)
		: "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "memory");
	FILE *f = fopen(argv[1], "w");
	if (!f)
		return 2;
	int width = avx ? 32 : 16, failed = 0;
	for (int r = 0; r < 16; r++)
		if (memcmp(regs.in[r], regs.out[r], width) != 0) {
			fprintf(f, "%cmm%d changed\n", avx ? 'y' : 'x', r);
			failed = 1;
		}
	if (memcmp(regs.gin, regs.gout, sizeof regs.gin) != 0) {
		fprintf(f, "a general register changed\n");
		failed = 1;
	}
	if (!failed)
		fprintf(f, "intact\n");
	fclose(f);
	checked();
	return failed ? 3 : 0;
}
