/* nolines.c: a server's request path as distributions ship it, with
 * symbols and no line information (tests build it with -g0). Four worker
 * threads take requests one at a time; request() stores an entry and a
 * copy of its 9-byte name (handle_set: 24 + 9 bytes kept a request, two
 * calls of one function) and replaces a one-entry cache (handle_get).
 * Both get their entry from entry_new, an allocation wrapper with two
 * callers. handle_set also keeps 16 bytes from pool_new, which main calls
 * twice at start-up: a wrapper only to whoever recorded the start.
 * ROUNDS requests per thread; 0 runs until killed, a request every 2 ms
 * per thread. Usage: nolines ROUNDS */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct entry {
	struct entry *next;
	char *name;
	long key;
};

static struct entry *table, *cache;
static char *tags, *boot[2];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int rounds;
static long next_key;

__attribute__((noinline)) struct entry *entry_new(long key)
{
	struct entry *e = malloc(sizeof *e);
	e->key = key;
	return e;
}

__attribute__((noinline)) char *pool_new(size_t size)
{
	return malloc(size);
}

__attribute__((noinline)) void handle_set(long key)
{
	struct entry *e = entry_new(key);
	e->name = malloc(9);
	memcpy(e->name, "key-0000", 9);
	e->next = table;
	table = e;
	char *tag = pool_new(16);
	*(char **)tag = tags;
	tags = tag;
}

__attribute__((noinline)) void handle_get(long key)
{
	struct entry *e = entry_new(key);
	free(cache);
	cache = e;
}

__attribute__((noinline)) void request(long key)
{
	handle_set(key);
	handle_get(key);
}

static void *worker(void *arg)
{
	(void)arg;
	for (int i = 0; rounds == 0 || i < rounds; i++) {
		pthread_mutex_lock(&mu);
		request(next_key++);
		pthread_mutex_unlock(&mu);
		if (rounds == 0) {
			struct timespec ts = {0, 2 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	rounds = argc > 1 ? atoi(argv[1]) : 25;
	boot[0] = pool_new(64);
	boot[1] = pool_new(32);
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	return 0;
}
