// symtest-cxx.cc - a C++ function for test-symbolize: its name must come out demangled.
#include "symtest.h"

namespace ns
{
__attribute__((noinline, noipa)) void *f(int x);

void *f(int x)
{
	void *volatile r = symtest_ret(); /* SYMTEST_CXX_CALL */
	(void)x;
	return r;
}
} // namespace ns

void *symtest_cxx(int x)
{
	return ns::f(x);
}
