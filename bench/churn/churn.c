// churn.c: a single-threaded target shaped like a real program. handle is
// called argv[1] times (default 1500); a breakpoint on handle stops it that
// many times. Each call parses a request into short-lived buffers (malloc
// and free churn), files a record into a table that grows (realloc), evicts
// the oldest record once the table holds 256, and leaks 8 bytes: the heap
// changes at every stop, through several call sites, as in a server.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct record {
	int id;
	char *name;
	char *payload;
};

static struct record **table;
static size_t len, cap;
static size_t first; // the oldest record still in the table

static char *parse(int i)
{
	char *line = malloc(64 + i % 192);
	snprintf(line, 64, "request %d from client %d", i, i % 17);
	char *word = malloc(32);
	memcpy(word, line, 8);
	word[8] = '\0';
	free(word);
	return line;
}

static struct record *file_record(int i, const char *line)
{
	struct record *r = malloc(sizeof *r);
	r->id = i;
	r->name = strdup(line);
	r->payload = calloc(1, 24 + i % 40);
	if (len == cap) {
		cap = cap ? 2 * cap : 16;
		table = realloc(table, cap * sizeof *table);
	}
	table[len++] = r;
	return r;
}

static void evict(void)
{
	struct record *r = table[first];
	table[first++] = NULL;
	free(r->name);
	free(r->payload);
	free(r);
}

static void leak(int i)
{
	char *tag = malloc(8);
	snprintf(tag, 8, "%d", i % 1000000);
}

void handle(int i)
{
	char *line = parse(i);
	file_record(i, line);
	free(line);
	if (len - first > 256)
		evict();
	leak(i);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1500;
	for (int i = 0; i < n; i++)
		handle(i);
	while (first < len)
		evict();
	free(table);
	return 0;
}
