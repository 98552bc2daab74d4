// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* One license section for the linked object; GPL-compatible for the helpers we use. */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";
