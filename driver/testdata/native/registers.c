// Stops with vector and general registers live: at the label probe,
// xmm0-15 (ymm0-15 where the CPU has AVX) and the caller-saved general
// registers hold known values, which the code after it checks. The native
// backend's inferior calls at that stop must give every one of them back.
// Exits 0 when they are intact, else 3 and says which changed.
#include <stdio.h>
#include <string.h>

// regs is what the registers are loaded from (in) and stored to (out),
// at the offsets the assembly below names.
static struct {
	unsigned char in[16][64];   // 0
	unsigned char out[16][64];  // 1024
	unsigned long gin[8];       // 2048
	unsigned long gout[8];      // 2112
} regs;

int main(void) {
	long avx = __builtin_cpu_supports("avx");
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
	// Only the bytes each path loaded are compared.
	int width = avx ? 32 : 16, failed = 0;
	for (int r = 0; r < 16; r++)
		if (memcmp(regs.in[r], regs.out[r], width) != 0) {
			printf("%cmm%d changed\n", avx ? 'y' : 'x', r);
			failed = 1;
		}
	if (memcmp(regs.gin, regs.gout, sizeof regs.gin) != 0) {
		printf("a general register changed\n");
		failed = 1;
	}
	if (!failed)
		printf("intact\n");
	return failed ? 3 : 0;
}
