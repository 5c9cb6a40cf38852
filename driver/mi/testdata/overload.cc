// overload gives gdb a breakpoint with two locations: `break twice` resolves
// to both overloads.
#include <cstdio>

int twice(int x) { return 2 * x; }
double twice(double x) { return 2 * x; }

int main()
{
	std::printf("%d %g\n", twice(2), twice(1.5));
	return 0;
}
