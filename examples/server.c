// server.c: snapctl's demo, a small multithreaded server with a real leak.
//
// A producer (main) puts requests on a queue; two worker threads take them
// off and handle them: parse the request into a scratch buffer, look up the
// client's session in a session cache (adding it when it is new), build a
// response and "send" it. A stats thread formats a report string every
// millisecond and frees it again.
//
// The bug: the session cache is meant to evict its oldest entry once it holds
// CACHE_MAX sessions, but cache_put never counts what it adds, so nothing is
// ever evicted and every new client leaks a 48-byte entry and the 23-byte
// copy of its token. Everything else (scratch buffers, responses, stats reports)
// is freed; it is the noise a leak hunt has to see through.
//
// Usage: server [--requests N] [--workers N]   (defaults 60 and 2)
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CACHE_MAX 16
#define QUEUE_LEN 8

struct request {
	int id;
	int client; // every request comes from a new client: a new session
};

struct session {
	struct session *next;
	char *token;
	int client;
	int hits;
	long created;
	long last_seen;
	char pad[8];
};

// The session cache: a singly linked list, newest first.
static struct session *cache;
static int cache_size; // never incremented: the bug
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

// The request queue, a ring buffer guarded by a mutex and two conditions.
static struct request queue[QUEUE_LEN];
static int q_head, q_len, q_closed;
static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_nonempty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t q_nonfull = PTHREAD_COND_INITIALIZER;

static atomic_int stopping;
static atomic_long bytes_sent;

static void cache_evict_oldest(void)
{
	struct session **p = &cache;
	if (*p == NULL)
		return;
	while ((*p)->next != NULL)
		p = &(*p)->next;
	free((*p)->token);
	free(*p);
	*p = NULL;
	cache_size--;
}

static void cache_put(int client, const char *token)
{
	struct session *s = calloc(1, sizeof *s); // leaks: never evicted
	s->client = client;
	s->token = strdup(token); // leaks with its entry
	s->created = s->last_seen = time(NULL);
	pthread_mutex_lock(&cache_mu);
	s->next = cache;
	cache = s;
	if (cache_size > CACHE_MAX) // cache_size stays 0: nothing is evicted
		cache_evict_oldest();
	pthread_mutex_unlock(&cache_mu);
}

static struct session *cache_get(int client)
{
	pthread_mutex_lock(&cache_mu);
	struct session *s = cache;
	while (s != NULL && s->client != client)
		s = s->next;
	if (s != NULL) {
		s->hits++;
		s->last_seen = time(NULL);
	}
	pthread_mutex_unlock(&cache_mu);
	return s;
}

void handle_request(const struct request *r)
{
	char *scratch = malloc(512); // parse buffer, freed below
	snprintf(scratch, 512, "GET /item/%d HTTP/1.1\r\nClient: %d\r\n", r->id, r->client);

	if (cache_get(r->client) == NULL) {
		char token[24];
		snprintf(token, sizeof token, "sess-%08d-%08x", r->client, (unsigned)r->client * 2654435761u);
		cache_put(r->client, token);
	}

	char *response = malloc(256 + strlen(scratch)); // freed once sent
	int n = sprintf(response, "HTTP/1.1 200 OK\r\n\r\nrequest %d served\r\n", r->id);
	atomic_fetch_add(&bytes_sent, n);
	free(response);
	free(scratch);
}

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&q_mu);
		while (q_len == 0 && !q_closed)
			pthread_cond_wait(&q_nonempty, &q_mu);
		if (q_len == 0 && q_closed) {
			pthread_mutex_unlock(&q_mu);
			return NULL;
		}
		struct request r = queue[q_head];
		q_head = (q_head + 1) % QUEUE_LEN;
		q_len--;
		pthread_cond_signal(&q_nonfull);
		pthread_mutex_unlock(&q_mu);
		handle_request(&r);
	}
}

static void *stats(void *arg)
{
	(void)arg;
	while (!atomic_load(&stopping)) {
		char *report = malloc(1024); // noise: freed at once
		snprintf(report, 1024, "bytes sent: %ld", atomic_load(&bytes_sent));
		free(report);
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void submit(const struct request *r)
{
	pthread_mutex_lock(&q_mu);
	while (q_len == QUEUE_LEN)
		pthread_cond_wait(&q_nonfull, &q_mu);
	queue[(q_head + q_len) % QUEUE_LEN] = *r;
	q_len++;
	pthread_cond_signal(&q_nonempty);
	pthread_mutex_unlock(&q_mu);
}

int main(int argc, char **argv)
{
	int requests = 60, workers = 2;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--requests") == 0)
			requests = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--workers") == 0)
			workers = atoi(argv[i + 1]);
	}
	if (workers < 1 || workers > 64) {
		fprintf(stderr, "server: --workers must be between 1 and 64\n");
		return 2;
	}

	pthread_t st, w[64];
	pthread_create(&st, NULL, stats, NULL);
	for (int i = 0; i < workers; i++)
		pthread_create(&w[i], NULL, worker, NULL);

	for (int i = 0; i < requests; i++) {
		struct request r = {.id = i, .client = 1000 + i};
		submit(&r);
	}

	pthread_mutex_lock(&q_mu);
	q_closed = 1;
	pthread_cond_broadcast(&q_nonempty);
	pthread_mutex_unlock(&q_mu);
	for (int i = 0; i < workers; i++)
		pthread_join(w[i], NULL);
	atomic_store(&stopping, 1);
	pthread_join(st, NULL);
	printf("served %d requests, %ld bytes\n", requests, atomic_load(&bytes_sent));
	return 0;
}
