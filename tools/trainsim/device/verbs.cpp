// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "device/verbs.h"

#include <cerrno>
#include <cstring>
#include <ctime>

#include "device/user_mem.h"
#include "rdma_uapi.h"

namespace trainsim::device {

namespace {

void sleep_ns(uint64_t ns)
{
	timespec ts{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}

} // namespace

uint64_t VerbsAdapter::cost_ns(bool registration, uint64_t bytes) const
{
	if (!registration)
		return cost_.admin_ns;
	return cost_.reg_fixed_ns + bytes / (1u << 20) * cost_.reg_per_mib_ns;
}

int VerbsAdapter::ioctl(pid_t tid, unsigned cmd, uint64_t arg, const void *hdr, size_t hdr_len)
{
	if (cmd != RDMA_VERBS_IOCTL_CMD || hdr_len < UVERBS_HDR_BYTES)
		return -ENOTTY;
	uint16_t h[4];
	memcpy(h, hdr, sizeof(h));
	const uint16_t object = h[UVERBS_HDR_OFF_OBJECT / 2], method = h[UVERBS_HDR_OFF_METHOD / 2];
	const uint16_t num_attrs = h[UVERBS_HDR_OFF_NUM_ATTRS / 2];
	if (num_attrs > 64)
		return -EINVAL;
	bool registration = false;
	uint64_t bytes = 0, core_in = 0;
	uint32_t write_cmd = ~0u;
	for (uint16_t i = 0; i < num_attrs; i++) {
		uint64_t a[2];
		if (int rc = copy_from_user(tid, a, arg + UVERBS_HDR_BYTES + i * UVERBS_ATTR_BYTES, sizeof(a)))
			return rc;
		const uint16_t id = static_cast<uint16_t>(a[0]);
		if (object == UVERBS_OBJ_MR && method == UVERBS_METH_REG_DMABUF_MR &&
		    id == UVERBS_ATTR_REG_DMABUF_MR_LENGTH)
			bytes = a[1];
		if (object == UVERBS_OBJ_DEVICE && method == UVERBS_METH_INVOKE_WRITE) {
			if (id == UVERBS_ATTR_WRITE_CMD)
				write_cmd = static_cast<uint32_t>(a[1]);
			else if (id == UVERBS_ATTR_CORE_IN)
				core_in = a[1];
		}
	}
	if (object == UVERBS_OBJ_MR && method == UVERBS_METH_REG_DMABUF_MR)
		registration = true;
	if (write_cmd == UVERBS_CMD_REG_MR) {
		registration = true;
		if (int rc = copy_from_user(tid, &bytes, core_in + UVERBS_REG_MR_OFF_LENGTH, sizeof(bytes)))
			return rc;
	}
	++calls_;
	if (registration)
		registered_ += bytes;
	sleep_ns(cost_ns(registration, bytes));
	return 0;
}

long VerbsAdapter::write(pid_t, const void *buf, size_t len)
{
	if (len < UVERBS_CMD_HDR_BYTES)
		return -EINVAL;
	uint32_t command;
	memcpy(&command, buf, sizeof(command));
	command &= UVERBS_CMD_MASK;
	uint64_t bytes = 0;
	const bool registration = command == UVERBS_CMD_REG_MR;
	if (registration) {
		if (len < UVERBS_CMD_HDR_BYTES + UVERBS_REG_MR_OFF_LENGTH + sizeof(bytes))
			return -EINVAL;
		memcpy(&bytes, static_cast<const char *>(buf) + UVERBS_CMD_HDR_BYTES + UVERBS_REG_MR_OFF_LENGTH,
		       sizeof(bytes));
		registered_ += bytes;
	}
	++calls_;
	sleep_ns(cost_ns(registration, bytes));
	return static_cast<long>(len);
}

} // namespace trainsim::device
