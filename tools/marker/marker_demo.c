// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A step loop that marks its steps: N steps of (sleep A ms, spin B ms), optionally step S
 * sleeping X ms more (an outlier), and from step C on spinning D ms instead of B (a change
 * in step time; S -1 for none). Used by the tests.
 * usage: marker-demo [N [A [B [S X [C D]]]]] */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "steptrace_marker.h"

/* At least `ms` of wall clock, counted in ns: whole milliseconds of
 * (tv_nsec difference) truncate toward zero when a second boundary falls
 * inside the spin, which ended it up to 1 ms early (a CI run saw a 9.05 ms
 * spin of 10). */
static void spin_ms(long ms)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while ((long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec) < (long long)ms * 1000000LL);
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 10;
	long sleep_ms = argc > 2 ? atol(argv[2]) : 10, spin = argc > 3 ? atol(argv[3]) : 5;
	int slow_step = argc > 5 ? atoi(argv[4]) : -1;
	long slow_ms = argc > 5 ? atol(argv[5]) : 0;
	int change_step = argc > 7 ? atoi(argv[6]) : -1;
	long changed_spin = argc > 7 ? atol(argv[7]) : spin;
	for (int i = 0; i < steps; ++i) {
		steptrace_step((uint64_t)i);
		usleep((useconds_t)((sleep_ms + (i == slow_step ? slow_ms : 0)) * 1000));
		spin_ms(change_step >= 0 && i >= change_step ? changed_spin : spin);
	}
	steptrace_step((uint64_t)steps); /* closes the last step */
	return 0;
}
