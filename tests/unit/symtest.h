/* symtest.h - the test library of test-symbolize: each function returns the return
 * address of a call made at a marked line of symtest.c or symtest-cxx.cc. */
#ifndef HEAPPROF_TESTS_SYMTEST_H
#define HEAPPROF_TESTS_SYMTEST_H

#ifdef __cplusplus
extern "C" {
#endif

void *symtest_ret(void);
void *symtest_plain(void);
void *symtest_outer(void);
void *symtest_cxx(int x);

#ifdef __cplusplus
}
#endif

#endif
