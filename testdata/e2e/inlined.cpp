// inlined.cpp: built with -O2, so that Cache::add and the std::vector
// code it calls are inlined into handle(). Valgrind names inlined frames
// by their bare DWARF names (add, push_back, allocate); snapctl must report
// store::Cache::add as the site, with the std:: frames as library frames.
#include <cstdlib>
#include <vector>

namespace store {
struct Cache {
	std::vector<int *> items;
	void add(int v) { items.push_back(new int(v)); } // the leak: an int per call
};
} // namespace store

static store::Cache cache;

void __attribute__((noinline)) handle(int i)
{
	cache.add(i);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4;
	for (int i = 0; i < n; i++)
		handle(i);
	return 0;
}
