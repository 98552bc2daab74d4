// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "nrt/nrt_verbs.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "rdma_uapi.h"
#include "sim/clock.h"

namespace trainsim::nrt_verbs {

namespace {

struct State {
	std::mutex mu;
	int fd = -1;
	bool set_up = false;
	std::vector<trainsim_verb_call> log;
};

State &st()
{
	static State s;
	return s;
}

uint64_t now_ns()
{
	return static_cast<uint64_t>(trainsim::now_ns());
}

struct Attr {
	uint16_t id, len, flags, reserved;
	uint64_t data;
};
static_assert(sizeof(Attr) == UVERBS_ATTR_BYTES);

struct IoctlBuf {
	uint16_t length, object_id, method_id, num_attrs;
	uint64_t reserved1;
	uint32_t driver_id, reserved2;
	Attr attrs[4];
};
static_assert(offsetof(IoctlBuf, attrs) == UVERBS_HDR_BYTES);

// struct ib_uverbs_reg_mr (the legacy command's input)
struct RegMr {
	uint64_t response, start, length, hca_va;
	uint32_t pd_handle, access_flags;
};
static_assert(offsetof(RegMr, length) == UVERBS_REG_MR_OFF_LENGTH);

void logged(const char *name, uint64_t t0, int rc, uint64_t bytes)
{
	trainsim_verb_call c{};
	snprintf(c.name, sizeof(c.name), "%s", name);
	c.enter_ns = t0;
	c.return_ns = now_ns();
	c.bytes = bytes;
	c.ret = rc;
	st().log.push_back(c);
}

int verbs_ioctl(const char *name, uint16_t object, uint16_t method, const Attr *attrs, uint16_t n, uint64_t bytes)
{
	IoctlBuf b{};
	b.object_id = object;
	b.method_id = method;
	b.num_attrs = n;
	b.length = static_cast<uint16_t>(UVERBS_HDR_BYTES + n * UVERBS_ATTR_BYTES);
	memcpy(b.attrs, attrs, n * sizeof(Attr));
	uint64_t t0 = now_ns();
	int rc = ioctl(st().fd, RDMA_VERBS_IOCTL_CMD, &b) == 0 ? 0 : -errno;
	logged(name, t0, rc, bytes);
	return rc;
}

// A legacy command wrapped in the ioctl (what rdma-core does on kernels that
// support it): object DEVICE, method INVOKE_WRITE, the command number inline.
int invoke_write(const char *name, uint32_t cmd, const void *in, uint16_t in_len, uint64_t bytes)
{
	static thread_local uint8_t out[64];
	Attr a[3] = {{UVERBS_ATTR_CORE_IN, in_len, 1, 0, reinterpret_cast<uint64_t>(in)},
		     {1 /* CORE_OUT */, sizeof(out), 2, 0, reinterpret_cast<uint64_t>(out)},
		     {UVERBS_ATTR_WRITE_CMD, 4, 1, 0, cmd}};
	return verbs_ioctl(name, UVERBS_OBJ_DEVICE, UVERBS_METH_INVOKE_WRITE, a, 3, bytes);
}

int reg_mr(uint64_t bytes)
{
	RegMr m{};
	m.start = 0x7f0000000000ull;
	m.length = bytes;
	m.hca_va = m.start;
	m.access_flags = 0x7;
	return invoke_write("reg_mr", UVERBS_CMD_REG_MR, &m, sizeof(m), bytes);
}

int dereg_mr()
{
	uint32_t handle[2] = {1, 0};
	return invoke_write("dereg_mr", UVERBS_CMD_DEREG_MR, handle, sizeof(handle), 0);
}

} // namespace

void setup(uint64_t mr_bytes)
{
	State &s = st();
	std::lock_guard lk(s.mu);
	const char *path = getenv("TRAINSIM_UVERBS_DEVICE");
	if (s.set_up || !path || !*path)
		return;
	s.fd = open(path, O_RDWR | O_CLOEXEC);
	if (s.fd < 0) {
		fprintf(stderr, "nrt: cannot open %s: %s (no EFA control path)\n", path, strerror(errno));
		return;
	}
	s.set_up = true;
	// ibv_open_device + ibv_get_context: the first command goes through
	// write(2) (the library does not yet know the kernel's ioctl support).
	struct {
		uint32_t command;
		uint16_t in_words, out_words;
		uint64_t response;
	} gc{UVERBS_CMD_GET_CONTEXT, 4, 2, 0};
	uint64_t t0 = now_ns();
	int rc = write(s.fd, &gc, sizeof(gc)) == static_cast<ssize_t>(sizeof(gc)) ? 0 : -errno;
	logged("get_context", t0, rc, 0);
	uint8_t q[16] = {};
	invoke_write("query_device", UVERBS_CMD_QUERY_DEVICE, q, sizeof(q), 0);
	invoke_write("alloc_pd", UVERBS_CMD_ALLOC_PD, q, sizeof(q), 0);
	Attr none[1] = {{0, 0, 0, 0, 0}};
	verbs_ioctl("create_cq", UVERBS_OBJ_CQ, UVERBS_METH_CREATE, none, 1, 0);
	// One SRD queue pair per peer direction (libfabric's EFA provider).
	verbs_ioctl("create_qp", UVERBS_OBJ_QP, UVERBS_METH_CREATE, none, 1, 0);
	verbs_ioctl("create_qp", UVERBS_OBJ_QP, UVERBS_METH_CREATE, none, 1, 0);
	// The collective buffer in device memory: a dma-buf registration.
	Attr dm[2] = {{UVERBS_ATTR_REG_DMABUF_MR_LENGTH, 8, 1, 0, mr_bytes}, {5 /* fd */, 4, 1, 0, 0}};
	verbs_ioctl("reg_dmabuf_mr", UVERBS_OBJ_MR, UVERBS_METH_REG_DMABUF_MR, dm, 2, mr_bytes);
}

int register_once(uint64_t bytes)
{
	State &s = st();
	std::lock_guard lk(s.mu);
	if (!s.set_up)
		return 0;
	int rc = reg_mr(bytes);
	int rc2 = dereg_mr();
	return rc ? rc : rc2;
}

void teardown()
{
	State &s = st();
	std::lock_guard lk(s.mu);
	if (!s.set_up)
		return;
	Attr none[1] = {{0, 0, 0, 0, 0}};
	verbs_ioctl("dereg_mr", UVERBS_OBJ_MR, UVERBS_METH_MR_DESTROY, none, 1, 0);
	verbs_ioctl("destroy_qp", UVERBS_OBJ_QP, UVERBS_METH_DESTROY, none, 1, 0);
	verbs_ioctl("destroy_qp", UVERBS_OBJ_QP, UVERBS_METH_DESTROY, none, 1, 0);
	verbs_ioctl("destroy_cq", UVERBS_OBJ_CQ, UVERBS_METH_DESTROY, none, 1, 0);
	verbs_ioctl("dealloc_pd", UVERBS_OBJ_PD, 0, none, 1, 0);
	close(s.fd);
	s.fd = -1;
	s.set_up = false;
}

int calls(trainsim_verb_call *out, int max)
{
	State &s = st();
	std::lock_guard lk(s.mu);
	int n = static_cast<int>(s.log.size());
	for (int i = 0; i < n && i < max && out; i++)
		out[i] = s.log[static_cast<size_t>(i)];
	return n;
}

} // namespace trainsim::nrt_verbs
