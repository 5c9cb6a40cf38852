// A fast signal timer against breakpoints: SIGALRM every US microseconds
// (argument 2, default 200) from ITIMER_REAL while THREADS threads
// (argument 3, default 1: main alone) call work(i) CALLS times each
// (argument 1, default 300; 0: until SIGTERM), allocating. The handler (SA_RESTART) does a
// little work and counts its runs. After each call the thread checks that
// SIGALRM is not blocked, as the program left it: snapctl holds a thread's
// signals only for gdb's step over the breakpoint. Each call also goes
// through hop_jmp, hop_jcc and hop_ret, whose labels are a direct jump, a
// conditional jump and a return, for breakpoints on instructions that
// branch. PAUSE (argument 4, default 0) is microseconds each thread
// sleeps after a call: a process attached to runs until SIGTERM, and its
// threads need not keep the processors busy meanwhile for the timer's
// signals to come. It prints "calls N ticks T blocked B".
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static atomic_long ticks;
static atomic_int calls, blocked;
static volatile unsigned long sink;
static volatile sig_atomic_t quit;
static int per;
static long pause_us;

static void on_term(int sig) {
	(void)sig;
	quit = 1;
}

static void on_alarm(int sig) {
	(void)sig;
	unsigned long sum = 0;
	for (int i = 0; i < 200; i++)
		sum += (unsigned long)i * i;
	sink += sum;
	atomic_fetch_add(&ticks, 1);
}

// hop_jmp jumps over an instruction; at_jcc (in hop_jcc) jumps when the
// argument is even; hop_ret returns at once.
void hop_jmp(void);
void hop_jcc(int);
void hop_ret(void);
__asm__(".text\n"
	".globl hop_jmp\n.type hop_jmp, @function\nhop_jmp:\n"
	"	jmp 1f\n"
	"	ud2\n"
	"1:	ret\n"
	".globl hop_jcc\n.type hop_jcc, @function\nhop_jcc:\n"
	"	test $1, %edi\n"
	".globl at_jcc\nat_jcc:\n"
	"	jz 2f\n"
	"	nop\n"
	"2:	ret\n"
	".globl hop_ret\n.type hop_ret, @function\nhop_ret:\n"
	"	ret\n");

void work(int i) {
	atomic_fetch_add(&calls, 1);
	sink += (unsigned long)i;
}

static void *worker(void *arg) {
	(void)arg;
	for (int i = 0; per == 0 ? !quit : i < per; i++) {
		free(malloc(64 + i));
		work(i);
		hop_jmp();
		hop_jcc(i);
		hop_ret();
		sigset_t now;
		pthread_sigmask(SIG_BLOCK, NULL, &now);
		if (sigismember(&now, SIGALRM))
			atomic_fetch_add(&blocked, 1);
		if (pause_us > 0) {
			struct timespec ts = {0, pause_us * 1000};
			nanosleep(&ts, NULL); // a signal may cut it short
		}
	}
	return NULL;
}

int main(int argc, char **argv) {
	per = argc > 1 ? atoi(argv[1]) : 300;
	long us = argc > 2 ? atol(argv[2]) : 200;
	int n = argc > 3 ? atoi(argv[3]) : 1;
	pause_us = argc > 4 ? atol(argv[4]) : 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	struct itimerval it = {{0, us}, {0, us}};
	setitimer(ITIMER_REAL, &it, NULL);
	pthread_t t[64];
	if (n > 64)
		n = 64;
	for (int i = 1; i < n; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	worker(NULL);
	for (int i = 1; i < n; i++)
		pthread_join(t[i], NULL);
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	printf("calls %d ticks %ld blocked %d\n", atomic_load(&calls), atomic_load(&ticks), atomic_load(&blocked));
	return 0;
}
