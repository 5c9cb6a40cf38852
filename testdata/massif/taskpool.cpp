// taskpool.cpp: a scheduler whose allocations go through the C++ standard
// library (operator new -> std::__new_allocator -> std::_Hashtable /
// std::vector -> user code), so that call sites have library frames between
// the allocator and the user's own code.
//
// Scheduler::submit stores 8 tasks in an unordered_map<int, Task> and
// Scheduler::log_payload reserves a std::vector<char> of exactly 4000 bytes.
#include <string>
#include <unordered_map>
#include <vector>

struct Task {
	int id;
	long budget;
};

class Scheduler {
public:
	void submit(int id)
	{
		tasks_[id] = Task{id, 100};
	}
	void log_payload(std::size_t n)
	{
		log_.reserve(n);
	}
	std::size_t size() const { return tasks_.size() + log_.capacity(); }

private:
	std::unordered_map<int, Task> tasks_;
	std::vector<char> log_;
};

template <typename T, int N>
struct Pool {
	static T *make(std::size_t n) { return new T[n * N]; }
};

int main()
{
	Scheduler s;
	for (int i = 0; i < 8; i++)
		s.submit(i);
	s.log_payload(4000);
	int *p = Pool<int, 2>::make(50); // exactly 400 bytes through new[]
	int rc = s.size() > 0 && p != nullptr ? 0 : 1;
	delete[] p;
	p = Pool<int, 2>::make(25); // 200 bytes, live at exit
	return rc + (p == nullptr);
}
