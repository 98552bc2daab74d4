// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * uprobe.bpf.c - entry/return of user functions that mark steps: the Neuron
 * runtime (nrt_execute, nrt_tensor_write/read) and the steptrace_step()
 * marker. One program per direction; the attach cookie says which function.
 */
#include "common.bpf.h"

static __always_inline int st_uprobe_emit(struct pt_regs *ctx, __u32 is_return)
{
	struct st_uprobe *e;

	if (!(st_cfg.enabled & ST_SUB_UPROBE))
		return 0;
	if (!st_current_is_target())
		return 0;
	e = st_reserve(sizeof(*e), ST_EV_UPROBE);
	if (!e)
		return 0;
	e->probe = (__u32)bpf_get_attach_cookie(ctx);
	e->is_return = is_return;
	e->arg0 = is_return ? 0 : PT_REGS_PARM1(ctx);
	e->ret = is_return ? (__s64)PT_REGS_RC(ctx) : 0;
	st_submit(e);
	return 0;
}

SEC("uprobe")
int st_uprobe_entry(struct pt_regs *ctx)
{
	return st_uprobe_emit(ctx, 0);
}

SEC("uretprobe")
int st_uprobe_return(struct pt_regs *ctx)
{
	return st_uprobe_emit(ctx, 1);
}
