// SPDX-License-Identifier: Apache-2.0
/*
 * uverbs_client - drives the mock uverbs0 (tools/mock-neuron) the way
 * rdma-core and libfabric set up an EFA endpoint: a legacy write(2) command,
 * a legacy command wrapped in the ioctl, a dma-buf registration and a queue
 * pair, with the kernel's layouts (bpf/rdma_uapi.h). Writes what steptrace
 * should report to EXPECT_FILE, one "NAME COUNT BYTES" a line.
 *
 *   uverbs_client DEVICE EXPECT_FILE
 *
 * Also issues RDMA_VERBS_IOCTL on /dev/null and writes a command-like buffer
 * to a pipe, which must NOT be counted: steptrace filters by the uverbs char
 * major, never by the command value.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "rdma_uapi.h"

struct attr {
	uint16_t id, len, flags, reserved;
	uint64_t data;
};
struct ioctl_buf {
	uint16_t length, object_id, method_id, num_attrs;
	uint64_t reserved1;
	uint32_t driver_id, reserved2;
	struct attr attrs[3];
};

static int verbs_ioctl(int fd, uint16_t obj, uint16_t meth, const struct attr *a, uint16_t n)
{
	struct ioctl_buf b;
	memset(&b, 0, sizeof(b));
	b.object_id = obj;
	b.method_id = meth;
	b.num_attrs = n;
	b.length = (uint16_t)(UVERBS_HDR_BYTES + n * UVERBS_ATTR_BYTES);
	memcpy(b.attrs, a, n * sizeof(*a));
	return ioctl(fd, RDMA_VERBS_IOCTL_CMD, &b);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: uverbs_client DEVICE EXPECT_FILE\n");
		return 2;
	}
	int fd = open(argv[1], O_RDWR);
	if (fd < 0) {
		fprintf(stderr, "uverbs_client: open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	struct {
		uint32_t command;
		uint16_t in_words, out_words;
		uint64_t response;
	} gc = {UVERBS_CMD_GET_CONTEXT, 4, 2, 0};
	if (write(fd, &gc, sizeof(gc)) != (ssize_t)sizeof(gc)) {
		perror("uverbs_client: write GET_CONTEXT");
		return 1;
	}
	uint64_t reg[5] = {0, 0x10000000, 1 << 20, 0x10000000, 0}; /* response, start, length, hca_va, pd|access */
	struct attr iw[3] = {{UVERBS_ATTR_CORE_IN, sizeof(reg), 1, 0, (uint64_t)(uintptr_t)reg},
			     {1, 0, 2, 0, 0},
			     {UVERBS_ATTR_WRITE_CMD, 4, 1, 0, UVERBS_CMD_REG_MR}};
	struct attr dm[2] = {{UVERBS_ATTR_REG_DMABUF_MR_LENGTH, 8, 1, 0, 2 << 20}, {5, 4, 1, 0, 0}};
	struct attr none[1] = {{0, 0, 0, 0, 0}};
	if (verbs_ioctl(fd, UVERBS_OBJ_DEVICE, UVERBS_METH_INVOKE_WRITE, iw, 3) ||
	    verbs_ioctl(fd, UVERBS_OBJ_MR, UVERBS_METH_REG_DMABUF_MR, dm, 2) ||
	    verbs_ioctl(fd, UVERBS_OBJ_QP, UVERBS_METH_CREATE, none, 1)) {
		perror("uverbs_client: RDMA_VERBS_IOCTL");
		return 1;
	}
	/* Decoys: the same command on /dev/null, a command-like write to a pipe. */
	int null_fd = open("/dev/null", O_RDWR), p[2];
	if (null_fd >= 0)
		(void)verbs_ioctl(null_fd, UVERBS_OBJ_QP, UVERBS_METH_CREATE, none, 1);
	if (pipe(p) == 0)
		(void)!write(p[1], &gc, sizeof(gc));
	FILE *e = fopen(argv[2], "w");
	if (!e)
		return 1;
	fprintf(e, "get_context 1 0\nreg_mr 1 %d\nreg_dmabuf_mr 1 %d\ncreate_qp 1 0\n", 1 << 20, 2 << 20);
	fclose(e);
	return 0;
}
