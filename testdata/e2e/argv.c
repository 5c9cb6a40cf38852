// argv.c: writes its arguments after the first to the file named by the
// first, each followed by a NUL byte, so a test can check that arguments
// with spaces, quotes and shell metacharacters reach the target intact.
// record() is called once per argument, for a breakpoint to hit.
#include <stdio.h>
#include <string.h>

void record(FILE *f, const char *arg)
{
	fwrite(arg, 1, strlen(arg) + 1, f);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	FILE *f = fopen(argv[1], "wb");
	if (f == NULL)
		return 1;
	for (int i = 2; i < argc; i++)
		record(f, argv[i]);
	return fclose(f) == 0 ? 0 : 1;
}
