// bench/sites.sh's allocation-heavy target: THREADS threads (default 4)
// each run ROUNDS rounds (default 100) of WORK iterations (default 600)
// of new/delete of varied sizes, std::string building, std::vector
// growth and std::map insert/erase churn, and call round_done(round) at
// the end of each round, where the plan breaks. Each round also leaks one
// 48-byte Record per thread (make_record), the leak a run should find.
// Built with g++ -g -O2 -pthread (no -march=native: valgrind 3.19 cannot
// run AVX-512 code).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

// escape keeps the optimizer from removing an allocation it can see is
// unused (new/delete pairs may be elided since C++14).
static inline void escape(void *p) { asm volatile("" : : "r"(p) : "memory"); }

extern "C" __attribute__((noinline)) void round_done(int round) { asm volatile("" : : "r"(round) : "memory"); }

// hash is FNV-1a: the program reads what it allocated, a byte at a time.
static unsigned long hash(const char *p, size_t n) {
	unsigned long h = 14695981039346656037ul;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 1099511628211ul;
	return h;
}

struct Record {
	long id;
	char tag[40];
};

__attribute__((noinline)) Record *make_record(long id) {
	Record *r = new Record;
	r->id = id;
	snprintf(r->tag, sizeof r->tag, "record-%ld", id);
	return r;
}

// work runs one thread's rounds and returns a checksum.
static unsigned long work(int self, int rounds, int iters) {
	unsigned long sum = 0;
	unsigned seed = 12345u + self;
	std::map<int, std::string> table;
	for (int round = 0; round < rounds; round++) {
		for (int i = 0; i < iters; i++) {
			seed = seed * 1103515245u + 12345u;
			// Raw buffers of 16 B to 4 KiB, filled and read.
			size_t n = 16 + (seed >> 8) % 4096;
			char *buf = new char[n];
			memset(buf, i, n);
			sum += hash(buf, n);
			escape(buf);
			delete[] buf;
			// A string built piece by piece, past the small-string buffer.
			std::string s = "request-";
			s += std::to_string(seed % 100000);
			s += "/path/to/some/resource?query=";
			s += std::to_string(i);
			sum += s.size();
			// A vector that grows by doubling.
			std::vector<int> v;
			for (unsigned k = 0; k < 16 + seed % 48; k++)
				v.push_back(k);
			sum += v.back();
			// The table keeps about 256 entries: insert one, erase one.
			int key = (seed >> 4) % 512;
			auto it = table.find(key);
			if (it != table.end())
				table.erase(it);
			else
				table.emplace(key, s);
		}
		Record *leak = make_record(self * 1000000L + round);
		escape(leak);
		round_done(round);
	}
	return sum;
}

int main(int argc, char **argv) {
	int threads = argc > 1 ? atoi(argv[1]) : 4;
	int rounds = argc > 2 ? atoi(argv[2]) : 100;
	int iters = argc > 3 ? atoi(argv[3]) : 600;
	std::vector<std::thread> ts;
	std::vector<unsigned long> sums(threads);
	for (int t = 0; t < threads; t++)
		ts.emplace_back([&, t] { sums[t] = work(t, rounds, iters); });
	unsigned long total = 0;
	for (int t = 0; t < threads; t++) {
		ts[t].join();
		total += sums[t];
	}
	printf("%lu\n", total);
	return 0;
}
