// tcpclient.c: the workload for tcpserver.c. It waits for the port file
// argv[1], sends argv[2] requests (one connection each) and reads each
// answer, then exits with argv[3] (default 0).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	int port = 0;
	for (int i = 0; i < 600 && port == 0; i++) {
		FILE *f = fopen(argv[1], "r");
		if (f) {
			if (fscanf(f, "%d", &port) != 1)
				port = 0;
			fclose(f);
		}
		if (port == 0) {
			struct timespec ts = {0, 100000000};
			nanosleep(&ts, NULL);
		}
	}
	if (port == 0)
		return 3;
	int n = atoi(argv[2]);
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
			perror("connect");
			return 4;
		}
		char req[32], ans[8];
		int m = snprintf(req, sizeof req, "client-%d\n", i);
		if (write(fd, req, m) != m || read(fd, ans, sizeof ans) <= 0) {
			perror("request");
			return 5;
		}
		close(fd);
	}
	return argc > 3 ? atoi(argv[3]) : 0;
}
