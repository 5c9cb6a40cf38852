// registry.cpp: a C++ request loop whose leak goes through
// std::unordered_map: every request adds an entry to a registry that is
// never pruned.
//
// The map reserves its buckets up front, so no rehash happens during the
// run and each insertion allocates exactly one hash node: 16 bytes on
// x86_64 libstdc++ for unordered_map<int, int> (next pointer + pair, hash
// not cached). massif's stack for that node runs through libstdc++'s
// allocator templates; the first frame in the program's own code is
// Registry::add. The number of requests is argv[1] (default 5).
#include <cstdlib>
#include <unordered_map>

class Registry {
public:
	Registry() { entries_.reserve(1024); }
	void add(int id);

private:
	std::unordered_map<int, int> entries_;
};

void Registry::add(int id)
{
	entries_[id] = id * 2; // the leak: one 16-byte node per request
}

static Registry *registry;

void handle_request(int id)
{
	registry->add(id);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? std::atoi(argv[1]) : 5;
	registry = new Registry;
	for (int i = 0; i < n; i++)
		handle_request(i);
	return 0;
}
