// taskpool.cpp: a scheduler that keeps every submitted task in an
// std::unordered_map. Massif sees the allocations in operator new, called
// from libstdc++'s allocator and hashtable code; snapctl must report them at
// Scheduler::submit (taskpool.cpp:34), the first frame in this file. main
// also allocates an array with new[] directly (taskpool.cpp:46).
//
// Usage: taskpool DIR  (writes DIR/before.ms and DIR/after.ms)
#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include <valgrind/valgrind.h>

struct Task {
	int id;
	char payload[40];
};

static void snapshot(const char *dir, const char *name) {
	char cmd[512];
	std::snprintf(cmd, sizeof cmd, "detailed_snapshot %s/%s.ms", dir, name);
	if (VALGRIND_MONITOR_COMMAND(cmd) != 0) {
		std::fprintf(stderr, "monitor command failed: %s\n", cmd);
		std::exit(2);
	}
}

class Scheduler {
public:
	void submit(int id);

private:
	std::unordered_map<int, Task> tasks_;
};
void Scheduler::submit(int id) { tasks_.emplace(id, Task{id, {}}); }

int main(int argc, char **argv) {
	if (argc != 2) {
		std::fprintf(stderr, "usage: taskpool DIR\n");
		return 2;
	}
	Scheduler s;
	snapshot(argv[1], "before");
	for (int i = 0; i < 10; i++)
		s.submit(i);
	int *ids = new int[16];
	snapshot(argv[1], "after");
	delete[] ids;
	return 0;
}
