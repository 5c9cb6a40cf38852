// A 4-thread service on OpenFST (Debian libfst-dev), in one of two
// shapes; one build serves both, as OpenFST's templates take most of
// the compiler's time.
//
// Rounds (the default): in round r, every worker builds 8+r trie
// acceptors, sorts and minimizes them through the library, keeps a small
// summary
// of it in place of the previous round's and destroys the rest. The main
// thread calls round_done(r) once every worker has finished the round and
// waits at the barrier of the next: at each stop no thread is in the middle
// of its work.
//
// The summary is allocated after the round's machines, at the top of its
// worker's arena, so the freed machines below it stay with glibc: resident
// memory and the allocator's free bytes grow round after round while the
// heap in use does not (retention). Asked to leak, each worker also
// leaks a small machine per round (leak).
//
// Requests (`service`), with a leak: each request builds a trie acceptor
// of 50 to 200 words, sorts and minimizes it through the library and
// destroys it, and every EVERY-th request (4) also keeps 64 KiB (load,
// the leak's line): 16 KiB a request, 6.4 KiB with every 10th.
// request_done is called after each request, by whichever worker served
// it: at each stop the other workers are in the middle of theirs, the
// library's blocks of their machines allocated. REQUESTS is the requests
// to serve in all (200).
//
//   g++ -g -O0 -pthread -std=c++17 fst.cpp -o fst -lfst
//   ./fst [ROUNDS [STEP [leak]]]
//   ./fst service [REQUESTS [EVERY]]
#include <fst/fstlib.h>
#include <pthread.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

using fst::StdArc;
using fst::StdVectorFst;

namespace {

constexpr int kWorkers = 4;
int rounds = 10;
int step = 800; // words of each machine
bool leak = false;
pthread_barrier_t start, done;

// build makes a trie of words/8 pseudo-random words of eight labels out
// of 16, fixed by seed: a deterministic acyclic acceptor of about `words`
// states.
StdVectorFst build(int words, unsigned seed) {
	StdVectorFst f;
	std::vector<std::array<int, 16>> child;
	auto state = [&] {
		child.emplace_back();
		child.back().fill(-1);
		return f.AddState();
	};
	f.SetStart(state());
	unsigned x = seed;
	for (int w = 0; w < words / 8; w++) {
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

// round builds r machines of `step` words, sorts and minimizes each
// through the library, and returns a summary of them; the machines are
// destroyed before it returns. Each machine is alike in shape, so every
// round allocates blocks of the same sizes, only more of them.
std::unique_ptr<std::vector<int>> round(int id, int r) {
	std::vector<StdVectorFst> machines;
	machines.reserve(64); // one block size whatever the round
	for (int i = 0; i < r; i++) {
		machines.push_back(build(step, 7919 * id + i));
		fst::ArcSort(&machines.back(), fst::ILabelCompare<StdArc>());
		fst::Minimize(&machines.back());
	}
	// Allocated while the machines are alive: above them in the arena.
	auto summary = std::make_unique<std::vector<int>>(64);
	for (int i = 0; i < r; i++) (*summary)[i % 64] += machines[i].NumStates();
	if (leak) new StdVectorFst(build(40, r)); // leak: fst
	return summary;
}

void *worker(void *arg) {
	int id = static_cast<int>(reinterpret_cast<long>(arg));
	// A first round of eight machines before the first stop fills
	// glibc's per-thread cache (tcache: up to 7 freed blocks of each
	// size, which mallinfo2 counts as in use) with every size the
	// rounds free, as a service's first requests do.
	std::unique_ptr<std::vector<int>> summary = round(id, 8);
	for (int r = 1; r <= rounds; r++) {
		pthread_barrier_wait(&start);
		summary = round(id, 8 + r); // frees the last round's summary
		pthread_barrier_wait(&done);
	}
	// Exit only once main is past its last stop.
	pthread_barrier_wait(&start);
	return nullptr;
}

} // namespace

extern "C" void round_done(int r) { (void)r; }

extern "C" void request_done(int n) { (void)n; }

namespace {

int requests = 200, served, every = 4;
pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
std::vector<void *> kept;

void *load(size_t n) {
	void *p = malloc(n); // planted
	memset(p, 1, n);
	return p;
}

// serve is a worker of the requests' shape: build(8*w, x) is a trie of w
// words.
void *serve(void *arg) {
	unsigned x = static_cast<unsigned>(reinterpret_cast<long>(arg));
	for (;;) {
		pthread_mutex_lock(&mu);
		int n = served < requests ? served++ : -1;
		pthread_mutex_unlock(&mu);
		if (n < 0) return nullptr;
		x = x * 1103515245 + 12345;
		StdVectorFst f = build(8 * (50 + (x >> 16) % 150), x);
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

int service(int argc, char **argv) {
	if (argc > 0) requests = std::atoi(argv[0]);
	if (argc > 1) every = std::atoi(argv[1]);
	kept.reserve(requests);
	pthread_t t[kWorkers];
	for (long i = 0; i < kWorkers; i++) pthread_create(&t[i], nullptr, serve, reinterpret_cast<void *>(i + 1));
	for (auto &th : t) pthread_join(th, nullptr);
	return 0;
}

} // namespace

int main(int argc, char **argv) {
	if (argc > 1 && std::strcmp(argv[1], "service") == 0) return service(argc - 2, argv + 2);
	if (argc > 1) rounds = std::atoi(argv[1]);
	if (argc > 2) step = std::atoi(argv[2]);
	if (argc > 3) leak = std::strcmp(argv[3], "leak") == 0;
	pthread_barrier_init(&start, nullptr, kWorkers + 1);
	pthread_barrier_init(&done, nullptr, kWorkers + 1);
	pthread_t t[kWorkers];
	for (long i = 0; i < kWorkers; i++) pthread_create(&t[i], nullptr, worker, reinterpret_cast<void *>(i));
	for (int r = 1; r <= rounds; r++) {
		pthread_barrier_wait(&start);
		pthread_barrier_wait(&done);
		round_done(r);
	}
	pthread_barrier_wait(&start);
	for (auto &th : t) pthread_join(th, nullptr);
	return 0;
}
