// A static program without a C library (built with -static -nostdlib):
// there is no glibc allocator to read, only resident memory.
void round_done(int r) { (void)r; }

void _start(void) {
	for (int r = 0; r < 3; r++)
		round_done(r);
	__asm__ volatile("mov $60, %eax\n\txor %edi, %edi\n\tsyscall");
}
