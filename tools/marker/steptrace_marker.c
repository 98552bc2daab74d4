// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libsteptrace_marker.so - an explicit training-step marker for steptrace.
 *
 * Call steptrace_step(step) at the top of every training step. The function
 * does nothing; steptrace puts a uprobe on it (found in the process's memory
 * maps) and cuts steps exactly there. Cost without steptrace: one call.
 */
#include <stdint.h>

#define STEPTRACE_EXPORT __attribute__((visibility("default"), noinline, used))

STEPTRACE_EXPORT void steptrace_step(uint64_t step)
{
	/* Keep the call (and its argument) from being optimised away. */
	__asm__ volatile("" : : "r"(step) : "memory");
}
