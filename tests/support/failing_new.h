/* Makes an allocation of the calling thread fail (support/failing_new.cpp). */
#ifndef MT_FAILING_NEW_H
#define MT_FAILING_NEW_H

#ifdef __cplusplus
extern "C" {
#endif

/* The n-th operator new of this thread from now on throws std::bad_alloc
 * (0: none). */
void mt_fail_new_after(long n);
/* What is left of the countdown: 0 once the failure was made (or when
 * off), else how many allocations short it fell. */
long mt_fail_new_left(void);
/* 1 when the countdown reaches operator new here; 0 when something else
 * serves it (valgrind replaces the program's operator new with its own):
 * a suite then skips, as no allocation can be made to fail. */
int mt_fail_new_works(void);

#ifdef __cplusplus
}
#endif

#endif
