// A 4-thread service on OpenFST (Debian libfst-dev): in round r, every
// worker builds 8+r trie acceptors, sorts and minimizes them through the
// library, keeps a small summary
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
//   g++ -g -O0 -pthread -std=c++17 fst.cpp -o fst -lfst
//   ./fst [ROUNDS [STEP [leak]]]
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

int main(int argc, char **argv) {
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
