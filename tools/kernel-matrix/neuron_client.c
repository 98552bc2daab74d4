// SPDX-License-Identifier: Apache-2.0
/*
 * neuron_client - drives the mock neuron.ko (tools/mock-neuron) the way the
 * Neuron runtime drives the real driver, with a known ioctl mix, and writes
 * what steptrace should report to EXPECT_FILE, one "NAME COUNT BYTES" a line.
 *
 *   neuron_client [DEVICE (/dev/neuron0)] [EXPECT_FILE (stdout)]
 *
 * Also issues a Neuron-numbered ioctl on /dev/null, which must NOT be counted:
 * steptrace filters by the device's char major, never by the 'N' magic.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "neuron_uapi.h"

#define KIB 1024ull
#define MIB (1024ull * 1024)
#define N_COPY_START 16
#define N_ACK 4

static int fd;

static void xioctl(unsigned long cmd, void *arg, const char *what)
{
	if (ioctl(fd, cmd, arg) != 0) {
		fprintf(stderr, "neuron_client: %s (0x%08lx) failed: %s\n", what, cmd, strerror(errno));
		exit(1);
	}
}

static __u64 alloc(__u64 size)
{
	__u64 handle = 0;
	struct neuron_arg_mem_alloc_v2mt64 a = { .size = size, .align = 4096 };

	a.mem_handle_ptr = (__u64)(unsigned long)&handle;
	xioctl(NEURON_CMD_MEM_ALLOC_V2MT64, &a, "MEM_ALLOC_V2MT64");
	return handle;
}

static void buf_copy(__u64 h, void *buf, __u64 size, int to_dev)
{
	struct neuron_arg_mem_buf_copy64 a = { .mem_handle = h, .buffer = (__u64)(unsigned long)buf,
					       .size = size, .copy_to_mem_handle = (__u32)to_dev };
	xioctl(NEURON_CMD_MEM_BUF_COPY64, &a, "MEM_BUF_COPY64");
}

int main(int argc, char **argv)
{
	const char *dev = argc > 1 ? argv[1] : "/dev/neuron0";
	FILE *exp = argc > 2 ? fopen(argv[2], "w") : stdout;
	static char buf[2 * MIB];
	__u64 h1, h2;
	int i, nul;

	if (!exp) {
		perror("neuron_client: expect file");
		return 1;
	}
	fd = open(dev, O_RDWR);
	if (fd < 0) {
		fprintf(stderr, "neuron_client: open %s: %s\n", dev, strerror(errno));
		return 1;
	}
	memset(buf, 0x5a, sizeof(buf));

	/* model load: two device chunks */
	h1 = alloc(4 * MIB);
	h2 = alloc(4 * MIB);
	/* instructions, then an input upload of 2 x 1 MiB and a 256 KiB output download */
	struct neuron_arg_program_engine_nc64 pe = { .nc_id = 0, .buffer = (__u64)(unsigned long)buf,
						     .size = 64 * KIB };
	xioctl(NEURON_CMD_PROGRAM_ENGINE_NC64, &pe, "PROGRAM_ENGINE_NC64");
	buf_copy(h1, buf, 1 * MIB, 1);
	buf_copy(h1, buf + MIB, 1 * MIB, 1);
	/* the step: kick DMA queues, acknowledge completions */
	for (i = 0; i < N_COPY_START; i++) {
		struct neuron_arg_dma_queue_copy_start q = { .eng_id = (__u32)i % 4, .qid = 1,
							     .tx_desc_count = 8, .rx_desc_count = 8 };
		xioctl(NEURON_CMD_DMA_QUEUE_COPY_START, &q, "DMA_QUEUE_COPY_START");
	}
	for (i = 0; i < N_ACK; i++) {
		struct neuron_arg_dma_ack_completed ack = { .eng_id = (__u32)i, .qid = 1, .count = 32 };
		xioctl(NEURON_CMD_DMA_ACK_COMPLETED, &ack, "DMA_ACK_COMPLETED");
	}
	struct neuron_arg_mem_copy64 mc = { .src_mem_handle = h1, .dst_mem_handle = h2, .size = 512 * KIB };
	xioctl(NEURON_CMD_MEM_COPY64, &mc, "MEM_COPY64");
	buf_copy(h2, buf, 256 * KIB, 0);
	struct neuron_arg_mem_free f1 = { h1 }, f2 = { h2 };
	xioctl(NEURON_CMD_MEM_FREE, &f1, "MEM_FREE");
	xioctl(NEURON_CMD_MEM_FREE, &f2, "MEM_FREE");

	/* 'N' magic on a file that is not a Neuron device: must be ignored by the tracer */
	nul = open("/dev/null", O_RDWR);
	if (nul >= 0) {
		struct neuron_arg_dma_queue_copy_start q = { 0 };
		(void)ioctl(nul, NEURON_CMD_DMA_QUEUE_COPY_START, &q); /* ENOTTY */
		close(nul);
	}
	close(fd);

	fprintf(exp, "MEM_ALLOC_V2MT64 2 0\n");
	fprintf(exp, "PROGRAM_ENGINE_NC64 1 %llu\n", 64 * KIB);
	fprintf(exp, "MEM_BUF_COPY64 3 %llu\n", 2 * MIB + 256 * KIB);
	fprintf(exp, "DMA_QUEUE_COPY_START %d 0\n", N_COPY_START);
	fprintf(exp, "DMA_ACK_COMPLETED %d 0\n", N_ACK);
	fprintf(exp, "MEM_COPY64 1 %llu\n", 512 * KIB);
	fprintf(exp, "MEM_FREE 2 0\n");
	if (exp != stdout)
		fclose(exp);
	return 0;
}
