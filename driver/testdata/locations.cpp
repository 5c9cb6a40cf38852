// locations.cpp: one of each kind of location a plan names, for the test
// that inserts InsertArgs' breakpoints into a real gdb.
#include <cstdio>
#include <cstdlib>

namespace ns {
int f(int a, char b) { return a + b; }
}

class Scheduler {
public:
    int submit(int job) { return job * 2; }
};

int handle_request(int id) {
    int queue_len = id % 3;          // locations.cpp:16
    return queue_len + ns::f(id, 'x');
}

int main(int argc, char **argv) {
    Scheduler s;
    int total = 0;
    for (int id = 0; id < 20; id++)
        total += handle_request(id) + s.submit(id);
    printf("%d\n", total);
    return argc > 5 ? EXIT_FAILURE : EXIT_SUCCESS;
}
