// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#define FUSE_USE_VERSION 312
#include "device/fuse_server.h"

#include <fuse_lowlevel.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace trainsim::device {

namespace {

constexpr fuse_ino_t kFirstDeviceIno = 2; // 1 is the root directory
// neuronN.nds: a symlink naming device N's datastore window file.
constexpr fuse_ino_t kFirstNdsIno = 1u << 20;
// uverbs0: the fake EFA adapter's verbs file.
constexpr fuse_ino_t kUverbsIno = 1u << 21;
constexpr const char *kUverbsName = "uverbs0";
constexpr off_t kStallFileBytes = 4096;

FuseServer *server(fuse_req_t req)
{
	return static_cast<FuseServer *>(fuse_req_userdata(req));
}

// libfuse's worker threads are unnamed (they inherit the process comm);
// name them so a tracer listing the daemon's threads sees what they are.
void name_worker()
{
	thread_local bool named = false;
	if (!named) {
		prctl(PR_SET_NAME, "nrt-fuse");
		prctl(PR_SET_TIMERSLACK, 1UL);
		named = true;
	}
}

Device *device_of(fuse_req_t req, fuse_ino_t ino)
{
	auto &devs = server(req)->devices();
	if (ino < kFirstDeviceIno || ino - kFirstDeviceIno >= devs.size())
		return nullptr;
	return devs[ino - kFirstDeviceIno].get();
}

bool fill_attr(fuse_req_t req, fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return true;
	}
	if (ino == kUverbsIno) {
		st->st_mode = S_IFREG | 0666;
		st->st_nlink = 1;
		return true;
	}
	if (ino >= kFirstNdsIno) {
		Device *d = device_of(req, ino - kFirstNdsIno + kFirstDeviceIno);
		if (!d || d->nds_path().empty())
			return false;
		st->st_mode = S_IFLNK | 0777;
		st->st_nlink = 1;
		st->st_size = static_cast<off_t>(d->nds_path().size());
		return true;
	}
	if (!device_of(req, ino))
		return false;
	// A regular file (not a character device): FUSE cannot serve device
	// nodes' ioctls, and the tracer matches by dev/ino anyway. One page
	// long when reads stall (a page-cache read past the end never reaches
	// the daemon), else empty.
	st->st_mode = S_IFREG | 0666;
	st->st_nlink = 1;
	st->st_size = server(req)->read_stall_ms() ? kStallFileBytes : 0;
	return true;
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	name_worker();
	if (parent == FUSE_ROOT_ID && strcmp(name, kUverbsName) == 0) {
		fuse_entry_param e{};
		e.ino = kUverbsIno;
		fill_attr(req, e.ino, &e.attr);
		e.attr_timeout = 3600;
		e.entry_timeout = 3600;
		fuse_reply_entry(req, &e);
		return;
	}
	unsigned idx;
	char tail;
	int n = sscanf(name, "neuron%u%c", &idx, &tail);
	bool nds = n == 2 && tail == '.' && strcmp(strchr(name, '.'), TRAINSIM_NDS_WINDOW_SUFFIX) == 0;
	if (parent != FUSE_ROOT_ID || (n != 1 && !nds)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fuse_entry_param e{};
	e.ino = (nds ? kFirstNdsIno : kFirstDeviceIno) + idx;
	if (!fill_attr(req, e.ino, &e.attr)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	e.attr_timeout = 3600;
	e.entry_timeout = 3600;
	fuse_reply_entry(req, &e);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info *)
{
	name_worker();
	struct stat st;
	if (!fill_attr(req, ino, &st)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fuse_reply_attr(req, &st, 3600);
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info *)
{
	name_worker();
	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	std::vector<char> buf(size);
	size_t used = 0;
	size_t n = server(req)->devices().size();
	// Entries: ".", "..", neuron0..neuronN-1, uverbs0; `off` is the next entry index.
	for (size_t i = static_cast<size_t>(off); i < n + 3; i++) {
		const bool uverbs = i == n + 2;
		std::string name = i == 0 ? "." : i == 1 ? ".." : uverbs ? kUverbsName : "neuron" + std::to_string(i - 2);
		struct stat st{};
		st.st_ino = i < 2 ? FUSE_ROOT_ID : uverbs ? kUverbsIno : kFirstDeviceIno + (i - 2);
		st.st_mode = i < 2 ? S_IFDIR : S_IFREG;
		size_t need = fuse_add_direntry(req, buf.data() + used, size - used, name.c_str(), &st,
						static_cast<off_t>(i + 1));
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf.data(), used);
}

void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	name_worker();
	Device *d = ino >= kFirstNdsIno ? device_of(req, ino - kFirstNdsIno + kFirstDeviceIno) : nullptr;
	if (!d || d->nds_path().empty()) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	fuse_reply_readlink(req, d->nds_path().c_str());
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info *fi)
{
	name_worker();
	if (!device_of(req, ino) && ino != kUverbsIno) {
		fuse_reply_err(req, ino == FUSE_ROOT_ID ? EISDIR : ENOENT);
		return;
	}
	// A chip opened read-only reads through the page cache (the hang read:
	// its reader waits killably for the page, state D, not in FUSE's
	// interruptible request wait); everything else goes straight through.
	bool paged = ino != kUverbsIno && (fi->flags & O_ACCMODE) == O_RDONLY;
	fi->direct_io = paged ? 0 : 1;
	fi->keep_cache = 0;
	fi->nonseekable = 1;
	fuse_reply_open(req, fi);
}

// Chip reads: only the hang read (trainsim --hang-kind dread) is served,
// after the configured stall, with zeros.
void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t, fuse_file_info *)
{
	name_worker();
	FuseServer *s = server(req);
	if (!device_of(req, ino) || s->read_stall_ms() == 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	s->stall(req);
	std::vector<char> zeros(size);
	fuse_reply_buf(req, zeros.data(), size);
}

void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg, fuse_file_info *,
	      unsigned flags, const void *in_buf, size_t in_bufsz, size_t)
{
	name_worker();
	Device *dev = device_of(req, ino);
	if (!dev && ino != kUverbsIno) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	if (flags & FUSE_IOCTL_COMPAT) { // the driver has no compat_ioctl either
		fuse_reply_err(req, ENOTTY);
		return;
	}
	pid_t tid = fuse_req_ctx(req)->pid;
	int rc = dev ? dev->ioctl(tid, cmd, reinterpret_cast<uint64_t>(arg), in_buf, in_bufsz)
		     : server(req)->verbs().ioctl(tid, cmd, reinterpret_cast<uint64_t>(arg), in_buf, in_bufsz);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		// Nothing goes back through FUSE's bounce buffer: results were written
		// to the caller's memory directly, as the driver's copy_to_user does.
		fuse_reply_ioctl(req, rc, nullptr, 0);
}

// Legacy verbs commands arrive as write(2) on uverbs0; chips take no writes.
void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t, fuse_file_info *)
{
	name_worker();
	if (ino != kUverbsIno) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	long rc = server(req)->verbs().write(fuse_req_ctx(req)->pid, buf, size);
	if (rc < 0)
		fuse_reply_err(req, static_cast<int>(-rc));
	else
		fuse_reply_write(req, static_cast<size_t>(rc));
}

const fuse_lowlevel_ops kOps = [] {
	fuse_lowlevel_ops ops{};
	ops.lookup = op_lookup;
	ops.getattr = op_getattr;
	ops.readdir = op_readdir;
	ops.open = op_open;
	ops.readlink = op_readlink;
	ops.ioctl = op_ioctl;
	ops.write = op_write;
	ops.read = op_read;
	return ops;
}();

} // namespace

FuseServer::FuseServer(std::vector<std::unique_ptr<Device>> &devices, VerbsAdapter &verbs)
	: devices_(devices), verbs_(verbs)
{
}

bool FuseServer::mount(const std::string &dir, std::string *err)
{
	const char *argv[] = {"trainsim-device", "-o", "fsname=trainsim-neuron,subtype=neuron"};
	fuse_args args = FUSE_ARGS_INIT(3, const_cast<char **>(argv));
	se_ = fuse_session_new(&args, &kOps, sizeof(kOps), this);
	if (!se_) {
		*err = "fuse_session_new failed";
		return false;
	}
	if (fuse_set_signal_handlers(se_) != 0) {
		*err = "fuse_set_signal_handlers failed";
		return false;
	}
	signals_ = true;
	if (fuse_session_mount(se_, dir.c_str()) != 0) {
		*err = "cannot mount FUSE on " + dir + " (is /dev/fuse there and are we root?)";
		return false;
	}
	mounted_ = true;
	return true;
}

void FuseServer::stall(fuse_req *req)
{
	auto now_ms = [] {
		timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
	};
	int64_t deadline = now_ms() + static_cast<int64_t>(read_stall_ms_);
	for (int64_t left; (left = deadline - now_ms()) > 0;) {
		if (fuse_session_exited(se_) || fuse_req_interrupted(req))
			return;
		timespec nap{0, static_cast<long>(std::min<int64_t>(left, 10)) * 1000000};
		nanosleep(&nap, nullptr);
	}
}

int FuseServer::run()
{
	fuse_loop_config *cfg = fuse_loop_cfg_create();
	fuse_loop_cfg_set_clone_fd(cfg, 0);
	fuse_loop_cfg_set_idle_threads(cfg, 8);
	int rc = fuse_session_loop_mt(se_, cfg);
	fuse_loop_cfg_destroy(cfg);
	return rc;
}

FuseServer::~FuseServer()
{
	if (!se_)
		return;
	if (signals_)
		fuse_remove_signal_handlers(se_);
	if (mounted_)
		fuse_session_unmount(se_);
	fuse_session_destroy(se_);
}

} // namespace trainsim::device
