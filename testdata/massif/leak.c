/* leak.c: a request handler that leaks its payload on every call.
 * make_payload allocates exactly 100 bytes per request; main serves
 * 10 requests, so 1000 bytes are live at exit. A 16-byte buffer allocated
 * once in main stays live too. */
#include <stdlib.h>
#include <string.h>

static char *keep[16];

char *make_payload(int i)
{
	char *p = malloc(100);
	memset(p, i, 100);
	return p;
}

void handle_request(int i)
{
	keep[i] = make_payload(i);
}

int main(void)
{
	char *buf = malloc(16);
	memset(buf, 0, 16);
	for (int i = 0; i < 10; i++)
		handle_request(i);
	free(buf);
	buf = malloc(16);
	return buf == NULL;
}
