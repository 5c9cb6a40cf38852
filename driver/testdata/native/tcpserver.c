// A threaded TCP server for snapctl attach: WORKERS threads (4 unless
// argv[2] says) accept connections on 127.0.0.1, each request is one line
// that handle_request() answers with "ok N\n" from a heap buffer, and a
// housekeeping thread starts a short-lived helper thread every 5 ms. A
// request "keep" also keeps a 104-byte record of it for good
// (keep_request), the server's leak. It
// writes the port it listens on to the file argv[1] and runs until killed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int listener;
static atomic_long served;

struct record {
	struct record *next;
	char text[92];
};
static struct record *_Atomic kept;

void keep_request(const char *line, size_t n) {
	struct record *r = malloc(sizeof *r);
	snprintf(r->text, sizeof r->text, "%.*s", (int)n, line);
	r->next = atomic_load(&kept);
	while (!atomic_compare_exchange_weak(&kept, &r->next, r))
		;
}

char *handle_request(const char *line, size_t n) {
	if (n == 4 && memcmp(line, "keep", 4) == 0)
		keep_request(line, n);
	char *resp = malloc(64 + n);
	snprintf(resp, 64 + n, "ok %ld %.*s\n", atomic_fetch_add(&served, 1) + 1, (int)n, line);
	return resp;
}

static void *worker(void *arg) {
	(void)arg;
	for (;;) {
		int c = accept(listener, NULL, NULL);
		if (c < 0)
			continue;
		char buf[256];
		ssize_t n = read(c, buf, sizeof buf);
		if (n > 0) {
			while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
				n--;
			char *resp = handle_request(buf, (size_t)n);
			ssize_t w = write(c, resp, strlen(resp));
			(void)w;
			free(resp);
		}
		close(c);
	}
	return NULL;
}

static void *helper(void *arg) {
	free(malloc(1000));
	return arg;
}

static void *housekeeping(void *arg) {
	(void)arg;
	for (;;) {
		pthread_t t;
		if (pthread_create(&t, NULL, helper, NULL) == 0)
			pthread_join(t, NULL);
		usleep(5000);
	}
	return NULL;
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: tcpserver PORTFILE [WORKERS]\n");
		return 2;
	}
	int workers = argc > 2 ? atoi(argv[2]) : 4;
	listener = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof a;
	if (bind(listener, (struct sockaddr *)&a, sizeof a) != 0 || listen(listener, 128) != 0 ||
	    getsockname(listener, (struct sockaddr *)&a, &len) != 0) {
		perror("tcpserver");
		return 1;
	}
	pthread_t t;
	for (int i = 0; i < workers; i++)
		pthread_create(&t, NULL, worker, NULL);
	pthread_create(&t, NULL, housekeeping, NULL);
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
	FILE *f = fopen(tmp, "w");
	if (f == NULL || fprintf(f, "%d\n", ntohs(a.sin_port)) < 0 || fclose(f) != 0 || rename(tmp, argv[1]) != 0) {
		perror("tcpserver");
		return 1;
	}
	for (;;)
		pause();
}
