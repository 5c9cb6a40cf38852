// A program that closes every descriptor it inherited, as daemons do,
// then opens the file argv[1] and writes 200 records into it, each built
// in a heap buffer; record_done(i) follows each record. argv[2] says how
// it closes: "loop" calls close() on 3 up to its limit of open files,
// "range" calls close_range(3, ~0U, 0). Then it runs a child through the
// shell that prints the LD_PRELOAD it was given, and prints how many
// bytes it wrote and how many its file holds.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void record_done(int i) { (void)i; }

int main(int argc, char **argv) {
	if (argc < 3)
		return 2;
	if (strcmp(argv[2], "range") == 0) {
		close_range(3, ~0U, 0);
	} else {
		long max = sysconf(_SC_OPEN_MAX);
		for (long fd = 3; fd < max; fd++)
			close((int)fd);
	}
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return 3;
	long wrote = 0;
	for (int i = 0; i < 200; i++) {
		char *rec = malloc(64);
		int n = snprintf(rec, 64, "record %d\n", i);
		wrote += write(fd, rec, (size_t)n);
		free(rec);
		record_done(i);
		usleep(1000);
	}
	close(fd);
	fflush(stdout);
	if (system("echo \"child LD_PRELOAD=${LD_PRELOAD-unset}\"") != 0)
		return 4;
	struct stat st;
	stat(argv[1], &st);
	printf("wrote %ld bytes, the file holds %lld\n", wrote, (long long)st.st_size);
	return 0;
}
