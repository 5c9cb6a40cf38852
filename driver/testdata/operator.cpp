// operator.cpp: a breakpoint on a C++ operator of a class template, which
// a plan names quoted: 'ns::Box<long>::operator<<(int)'.
//
// argv[2] threads (default 4) start together, each shifts argv[1] values
// (default 5) into one Box under a mutex, and exits; with 0, main shifts
// them itself. Each call keeps one 16-byte node:
// between two consecutive hits exactly one call has run.
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace ns {
template <typename T> struct Box {
    struct Node {
        T value;
        Node *next;
    };
    Node *head = nullptr;
    Box &operator<<(int n) {
        head = new Node{T(n), head}; // the leak: 16 bytes per call
        return *this;
    }
};
} // namespace ns

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 5;
    int threads = argc > 2 ? atoi(argv[2]) : 4;
    ns::Box<long> box;
    std::mutex mu;
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; t++)
        workers.emplace_back([&] {
            for (int i = 0; i < n; i++) {
                std::lock_guard<std::mutex> lock(mu);
                box << i;
            }
        });
    for (auto &w : workers)
        w.join();
    for (int i = 0; threads == 0 && i < n; i++)
        box << i;
    return 0;
}
