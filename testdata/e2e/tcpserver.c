// tcpserver.c: a server with no end of its own, for plans with a workload.
// It listens on 127.0.0.1 (an ephemeral port, written to the file argv[1]
// once it listens) and serves one request per connection forever:
// handle_request reads a line and keeps 48 bytes of it in a session list
// that is never freed (the leak), and uses a 4 KiB scratch buffer that it
// frees. SIGTERM ends it the default way; with argv[2], a number of
// milliseconds, SIGTERM makes it shut down as servers do: it closes its
// listening socket at once (connections are refused from then on), takes
// that long to finish, and exits 0.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct session {
	struct session *next;
	char name[40];
};

static struct session *sessions;
static volatile sig_atomic_t terminated;
static int listener;

// on_term closes the listening socket: an accept() it interrupts, or the
// next one, fails and the loop sees terminated.
static void on_term(int sig)
{
	(void)sig;
	terminated = 1;
	close(listener);
}

void handle_request(int fd)
{
	char *scratch = malloc(4096); // freed below
	ssize_t n = read(fd, scratch, 4095);
	if (n < 0)
		n = 0;
	scratch[n] = '\0';
	struct session *s = malloc(sizeof *s); // the leak: 48 bytes per request
	strncpy(s->name, scratch, sizeof s->name - 1);
	s->name[sizeof s->name - 1] = '\0';
	s->next = sessions;
	sessions = s;
	free(scratch);
	write(fd, "ok\n", 3);
}

int main(int argc, char **argv)
{
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof a;
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 16) != 0 ||
	    getsockname(ls, (struct sockaddr *)&a, &len) != 0) {
		perror("listen");
		return 1;
	}
	if (argc > 1) {
		FILE *f = fopen(argv[1], "w");
		if (!f)
			return 1;
		fprintf(f, "%d\n", ntohs(a.sin_port));
		fclose(f);
	}
	listener = ls;
	if (argc > 2) {
		// No SA_RESTART: SIGTERM interrupts accept().
		struct sigaction sa = {.sa_handler = on_term};
		sigaction(SIGTERM, &sa, NULL);
	}
	for (;;) {
		int fd = accept(ls, NULL, NULL);
		if (terminated) {
			long ms = atol(argv[2]);
			struct timespec ts = {ms / 1000, ms % 1000 * 1000000};
			while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
				;
			return 0;
		}
		if (fd < 0)
			continue;
		handle_request(fd);
		close(fd);
	}
}
