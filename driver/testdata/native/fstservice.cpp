// A 4-thread service on OpenFST (Debian libfst-dev) with a leak: each
// request builds a trie acceptor of 50 to 200 words, sorts and minimizes
// it through the library and destroys it, and every argv[2]-th request
// (4) also keeps 64 KiB (load, the leak's line): 16 KiB a
// request, 6.4 KiB with every 10th. request_done is called after each request, by
// whichever worker served it: at each stop the other workers are in the
// middle of theirs, the library's blocks of their machines allocated.
// argv[1] is the requests to serve in all (200).
//
//   g++ -g -O0 -pthread -std=c++17 fstservice.cpp -o fstservice -lfst
#include <fst/fstlib.h>
#include <pthread.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <vector>

using fst::StdArc;
using fst::StdVectorFst;

extern "C" void request_done(int n) { (void)n; }

namespace {

int requests = 200, served, every = 4;
pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
std::vector<void *> kept;

StdVectorFst build(int words, unsigned x) {
	StdVectorFst f;
	std::vector<std::array<int, 16>> child;
	auto state = [&] {
		child.emplace_back();
		child.back().fill(-1);
		return f.AddState();
	};
	f.SetStart(state());
	for (int w = 0; w < words; w++) {
		int s = 0;
		for (int i = 0; i < 8; i++) {
			x = x * 1103515245 + 12345;
			int label = (x >> 16) % 16;
			if (child[s][label] < 0) {
				int next = state();
				child[s][label] = next;
				f.AddArc(s, StdArc(label + 1, label + 1, StdArc::Weight::One(), next));
			}
			s = child[s][label];
		}
		f.SetFinal(s, StdArc::Weight::One());
	}
	return f;
}

void *load(size_t n) {
	void *p = malloc(n); // planted
	memset(p, 1, n);
	return p;
}

void *worker(void *arg) {
	unsigned x = (unsigned)(long)arg;
	for (;;) {
		pthread_mutex_lock(&mu);
		int n = served < requests ? served++ : -1;
		pthread_mutex_unlock(&mu);
		if (n < 0)
			return nullptr;
		x = x * 1103515245 + 12345;
		StdVectorFst f = build(50 + (x >> 16) % 150, x);
		fst::ArcSort(&f, fst::ILabelCompare<StdArc>());
		fst::Minimize(&f);
		if (n % every == every - 1) {
			void *p = load(64 << 10);
			pthread_mutex_lock(&mu);
			kept.push_back(p);
			pthread_mutex_unlock(&mu);
		}
		request_done(n);
	}
}

} // namespace

int main(int argc, char **argv) {
	if (argc > 1)
		requests = atoi(argv[1]);
	if (argc > 2)
		every = atoi(argv[2]);
	kept.reserve(requests);
	pthread_t t[4];
	for (long i = 0; i < 4; i++)
		pthread_create(&t[i], nullptr, worker, (void *)(i + 1));
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], nullptr);
	return 0;
}
