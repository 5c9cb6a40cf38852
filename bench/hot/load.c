/* load PORT CONNS REQUESTS: CONNS threads send REQUESTS requests in all to
 * the server on 127.0.0.1:PORT, one connection a request ("x\n", then the
 * answer read to its end), and print the seconds it took. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int port;
static atomic_long left;

static void *client(void *arg) {
	(void)arg;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	while (atomic_fetch_sub(&left, 1) > 0) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
			perror("connect");
			exit(1);
		}
		if (write(s, "x\n", 2) != 2)
			exit(1);
		char buf[128];
		while (read(s, buf, sizeof buf) > 0)
			;
		close(s);
	}
	return NULL;
}

int main(int argc, char **argv) {
	if (argc < 4)
		return 2;
	port = atoi(argv[1]);
	int n = atoi(argv[2]);
	atomic_store(&left, atol(argv[3]));
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_t t[64];
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, client, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%.3f\n", (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}
