/* service.cpp: a service with four worker threads and no leak, for the
 * report of a run with no suspect.
 *
 * Each round, main starts four workers that build and drop a map of
 * requests and a scratch buffer, then exit; main joins them and calls
 * round_done. Its cache holds 8 entries of 100 bytes in rounds 1-4 and
 * 9-12 and 4 in rounds 5-8 (argv[1] rounds, default 12): a site changes
 * between rounds 4 and 5 and between 8 and 9, and nothing grows. */
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

static std::vector<std::string *> cache;

static void resize_cache(size_t n)
{
	while (cache.size() > n) {
		delete cache.back();
		cache.pop_back();
	}
	while (cache.size() < n)
		cache.push_back(new std::string(100, 'c')); /* cache entry */
}

static void work(int id, int round)
{
	std::map<int, std::string> requests;
	for (int i = 0; i < 50; i++)
		requests[i] = std::string(200 + i + round, 'a' + id);
	std::vector<char> scratch(4096 * (id + 1), 's');
	(void)scratch;
}

extern "C" void round_done(int round)
{
	asm volatile("" : : "r"(round) : "memory");
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? std::atoi(argv[1]) : 12;
	cache.reserve(8);
	for (int r = 1; r <= rounds; r++) {
		resize_cache((r - 1) / 4 % 2 == 0 ? 8 : 4);
		{
			std::vector<std::thread> workers;
			for (int id = 0; id < 4; id++)
				workers.emplace_back(work, id, r);
			for (auto &w : workers)
				w.join();
		}
		round_done(r);
	}
	resize_cache(0);
	return 0;
}
