// throw.cpp: handles argv[1] requests (default 3), each leaking 24 bytes,
// then throws an exception nothing catches: std::terminate aborts the
// program with SIGABRT.
#include <cstdlib>
#include <stdexcept>

static void *kept[1024];

void handle_request(int id)
{
	kept[id % 1024] = std::malloc(24); // the leak: 24 bytes per request
}

void fail(void)
{
	throw std::runtime_error("no more requests"); // uncaught
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? std::atoi(argv[1]) : 3;
	for (int i = 0; i < n; i++)
		handle_request(i);
	fail();
}
