// overload.cpp: a location, note, that names two functions (overloads);
// main calls them in turn, n times each.
#include <cstdlib>

static volatile long sink;

void note(int n) {
    sink += n; // note(int)
}

void note(double d) {
    sink += (long)d; // note(double)
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3;
    for (int i = 0; i < n; i++) {
        note(i);
        note(i * 0.5);
    }
    return 0;
}
