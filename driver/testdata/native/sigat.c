// sigat.c: a signal that comes exactly at a breakpoint's address, as a
// timer's may. at_raise sends its own thread SIGALRM with tgkill(2), the
// instruction before the label at_signal, so that the kernel delivers the
// signal as the thread arrives there, before a breakpoint at at_signal
// traps: the handler's frame is saved with at_signal and the stack
// pointer of the call, which main's loop makes the same every time. Each
// call carries its number in r8, as a loop's call carries something that
// changes. Arguments: CALLS (default 50; 0: until SIGTERM), then
// microseconds to sleep between calls (default 0). It prints "calls N
// ticks T".
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t ticks, quit;

static void on_alarm(int sig) {
	(void)sig;
	ticks++;
}

static void on_term(int sig) {
	(void)sig;
	quit = 1;
}

void at_raise(long i, long tgid, long tid);
__asm__(".text\n"
	".globl at_raise\n.type at_raise, @function\nat_raise:\n"
	"	mov %rdi, %r8\n"
	"	mov %rsi, %rdi\n"
	"	mov %rdx, %rsi\n"
	"	mov $14, %edx\n"   /* SIGALRM */
	"	mov $234, %eax\n"  /* tgkill */
	"	syscall\n"
	".globl at_signal\n.type at_signal, @function\nat_signal:\n"
	"	nop\n"
	"	ret\n");

int main(int argc, char **argv) {
	long calls = argc > 1 ? atol(argv[1]) : 50;
	long us = argc > 2 ? atol(argv[2]) : 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	long n = 0;
	for (; (calls == 0 && !quit) || n < calls; n++) {
		at_raise(n, getpid(), gettid());
		if (us)
			usleep(us);
	}
	printf("calls %ld ticks %ld\n", n, (long)ticks);
	return 0;
}
