/* maps: maps a file of argv[1] at an offset of one page, readable and
 * executable, removes the file, and maps an anonymous page writable; prints
 * both addresses and waits for stdin to close. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
	long page = sysconf(_SC_PAGESIZE);
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	void *file = mmap(NULL, page, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, page);
	void *anon = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (file == MAP_FAILED || anon == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	close(fd);
	unlink(argv[1]);
	printf("%lx %lx\n", (unsigned long)file, (unsigned long)anon);
	fflush(stdout);
	char c;
	while (read(0, &c, 1) > 0) {
	}
	return 0;
}
