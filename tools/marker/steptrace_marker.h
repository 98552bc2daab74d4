/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef STEPTRACE_MARKER_H
#define STEPTRACE_MARKER_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
/* Marks the start of training step `step` for steptrace. */
void steptrace_step(uint64_t step);
#ifdef __cplusplus
}
#endif
#endif
