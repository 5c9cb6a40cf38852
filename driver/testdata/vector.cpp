// vector.cpp: a std::vector that only grows next to a buffer that is
// reused, for the tests of stepwise growth.
//
// Each call of handle_request appends one 32-byte record to history
// (libstdc++ doubles its capacity: 1, 2, 4, ... records) and writes into a
// scratch buffer that realloc grows to 256 bytes over the first four
// calls and then reuses for good.
#include <cstdlib>
#include <cstring>
#include <vector>

struct Record {
	char data[32];
};

static std::vector<Record> history;
static char *buf;
static size_t cap;

void handle_request(int i)
{
	size_t need = 64 * (1 + i % 4);
	if (need > cap) {
		buf = static_cast<char *>(realloc(buf, need)); // reused buffer
		cap = need;
	}
	memset(buf, i, need);
	history.push_back(Record{}); // grows in steps
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 5;
	for (int i = 0; i < n; i++)
		handle_request(i);
	return 0;
}
