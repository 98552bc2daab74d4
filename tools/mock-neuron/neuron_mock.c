// SPDX-License-Identifier: GPL-2.0
/*
 * neuron_mock.c - a mock of the AWS Neuron driver (neuron.ko) for steptrace's
 * kernel matrix. Ours, not AWS code. It reproduces only what a tracer can see:
 *
 *  - a char device region named "neuron" (dynamic major, in /proc/devices),
 *    class "neuron_device", nodes /dev/neuron0.. (minor = device index);
 *  - an unlocked_ioctl handler named ncdev_ioctl (like the real driver, so
 *    kprobes by symbol work) that answers the real command numbers and copies
 *    the real argument sizes, which often differ from _IOC_SIZE;
 *  - copy ioctls that busy-wait on the CPU in proportion to the bytes,
 *    in ndma_memcpy_wait_for_completion, as the real driver spins on DMA;
 *  - the neuron:* tracepoints with the real names and fields, fired where the
 *    real driver fires them (including its quirks: MEM_FREE emits
 *    ioctl_mem_alloc; copyin/copyout's offset field is never assigned).
 *
 * Memory chunks are bookkeeping only (no backing store): copy-in reads the user
 * buffer through a 64 KiB bounce buffer like the driver, copy-out zero-fills.
 */
#include <linux/module.h>
#include <linux/fs.h>
#include <linux/cdev.h>
#include <linux/device.h>
#include <linux/uaccess.h>
#include <linux/slab.h>
#include <linux/mutex.h>
#include <linux/ktime.h>
#include <linux/sched.h>
#include <linux/version.h>
#include <linux/delay.h>

#include "neuron_mock.h"
#include "neuron_uapi.h" /* steptrace's copy of the command values and layouts */

#define CREATE_TRACE_POINTS
#include "neuron_trace.h"

#define MOCK_MAX_DEVICES 8
#define MOCK_MAX_CHUNKS 64
#define MOCK_BOUNCE (64 << 10) /* the real driver bounces MEM_BUF_COPY through 64 KiB */

static unsigned int devices = 1;
module_param(devices, uint, 0444);
MODULE_PARM_DESC(devices, "number of /dev/neuronN nodes (1..8)");
static unsigned int copy_us_per_mib = 1000; /* about 1 GiB/s */
module_param(copy_us_per_mib, uint, 0644);
MODULE_PARM_DESC(copy_us_per_mib, "CPU spin per MiB copied, in microseconds");
static unsigned int copy_max_us = 50000;
module_param(copy_max_us, uint, 0644);
MODULE_PARM_DESC(copy_max_us, "cap on the spin of one copy ioctl, in microseconds");

struct mock_dev {
	struct neuron_device nd;
	struct mutex lock;
	struct mem_chunk chunks[MOCK_MAX_CHUNKS];
};

static dev_t mock_devt;
static struct cdev mock_cdev;
static struct class *mock_class;
static struct mock_dev *mock_devs;

/* Argument layouts the uapi header does not carry (x86_64, sizes as copied). */
struct arg_dma_queue_init { /* 48 */
	u32 eng_id, qid, tx_desc_count, rx_desc_count;
	u64 tx_handle, rx_handle, rxc_handle;
	u32 axi_port;
};
struct arg_eng_qid { /* DMA_QUEUE_RELEASE: 8 */
	u32 eng_id, qid;
};
struct arg_mem_buf_copy { /* legacy, 32 */
	u64 mem_handle, buffer;
	u32 size, offset, copy_to_mem_handle, pad;
};
struct arg_mem_copy { /* legacy, 32 */
	u64 src_mem_handle, dst_mem_handle;
	u32 size, src_offset, dst_offset, pad;
};

/* Real copied sizes of every command steptrace knows (neuron.md section 1). */
static const struct { u32 cmd; u32 copied; } mock_cmds[] = {
	{ NEURON_CMD_DEVICE_INFO, 80 },		{ NEURON_CMD_MEM_ALLOC, 32 },
	{ NEURON_CMD_MEM_FREE, 8 },		{ NEURON_CMD_MEM_COPY, 32 },
	{ NEURON_CMD_MEM_COPY64, 40 },		{ NEURON_CMD_MEM_COPY64_V2, 56 },
	{ NEURON_CMD_MEM_BUF_COPY, 32 },	{ NEURON_CMD_MEM_BUF_COPY64, 40 },
	{ NEURON_CMD_PROGRAM_ENGINE, 24 },	{ NEURON_CMD_MEMSET, 24 },
	{ NEURON_CMD_MEMSET64, 32 },		{ NEURON_CMD_MEM_GET_EXTENDED_INFO, 48 },
	{ NEURON_CMD_DMA_ENG_SET_STATE, 8 },	{ NEURON_CMD_DMA_QUEUE_INIT, 48 },
	{ NEURON_CMD_DMA_QUEUE_RELEASE, 8 },	{ NEURON_CMD_DMA_QUEUE_COPY_START, 16 },
	{ NEURON_CMD_DMA_ACK_COMPLETED, 12 },	{ NEURON_CMD_DMA_COPY_DESCRIPTORS, 32 },
	{ NEURON_CMD_DMA_COPY_DESCRIPTORS64, 40 }, { NEURON_CMD_SEMAPHORE_INCREMENT, 12 },
	{ NEURON_CMD_SEMAPHORE_DECREMENT, 12 },	{ NEURON_CMD_SEMAPHORE_READ, 12 },
	{ NEURON_CMD_SEMAPHORE_WRITE, 12 },	{ NEURON_CMD_EVENT_SET, 12 },
	{ NEURON_CMD_EVENT_GET, 12 },		{ NEURON_CMD_NOTIFICATIONS_INIT_V2, 48 },
	{ NEURON_CMD_ACQUIRE_NEURON_DS, 24 },	{ NEURON_CMD_RELEASE_NEURON_DS, 24 },
	{ NEURON_CMD_CRWL_READER_ENTER, 36 },	{ NEURON_CMD_CRWL_READER_EXIT, 36 },
	{ NEURON_CMD_CRWL_WRITER_ENTER, 36 },	{ NEURON_CMD_CRWL_WRITER_DOWNGRADE, 36 },
	{ NEURON_CMD_CRWL_NC_RANGE_MARK, 24 },	{ NEURON_CMD_CRWL_NC_RANGE_UNMARK, 24 },
	{ NEURON_CMD_CINIT_SET_STATE, 12 },	{ NEURON_CMD_MEM_ALLOC_V2, 40 },
	{ NEURON_CMD_MEM_ALLOC_V2MT, 48 },	{ NEURON_CMD_MEM_ALLOC_V2MT64, 56 },
	{ NEURON_CMD_NC_RESET, 8 },		{ NEURON_CMD_NC_RESET_READY, 8 },
	{ NEURON_CMD_PROGRAM_ENGINE_NC, 32 },	{ NEURON_CMD_PROGRAM_ENGINE_NC64, 40 },
	{ NEURON_CMD_DMABUF_FD, 24 },		{ NEURON_CMD_MEM_COPY_ASYNC, 48 },
	{ NEURON_CMD_MEM_COPY_ASYNC64, 56 },	{ NEURON_CMD_MEM_COPY_ASYNC_WAIT, 24 },
	{ NEURON_CMD_DRIVER_INFO_GET, 24 },	{ NEURON_CMD_MEM_BUF_ZEROCOPY64, 40 },
	{ NEURON_CMD_MEM_BUF_ZEROCOPY64_V2, 64 }, { NEURON_CMD_MEM_BUF_ZEROCOPY64_BATCHES, 32 },
	{ NEURON_CMD_DMA_QUEUE_INIT_BATCH, 12296 },
};

static int mock_copied_size(u32 cmd)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(mock_cmds); i++)
		if (mock_cmds[i].cmd == cmd)
			return mock_cmds[i].copied;
	return -1;
}

/* Handles are slot + 1; 0 is never valid. */
static struct mem_chunk *mock_chunk(struct mock_dev *md, u64 handle)
{
	if (handle == 0 || handle > MOCK_MAX_CHUNKS || !md->chunks[handle - 1].in_use)
		return NULL;
	return &md->chunks[handle - 1];
}

/*
 * The DMA wait: spin on the CPU, never sleep, like the real driver's udelay(1) poll loop.
 * We poll the monotonic clock rather than count udelay()s: under software emulation
 * udelay's calibration is off, and the tracer measures with the same clock.
 */
static noinline void ndma_memcpy_wait_for_completion(struct mock_dev *md, u64 bytes)
{
	u64 us = div_u64(bytes * copy_us_per_mib, 1 << 20), end;

	if (us > copy_max_us)
		us = copy_max_us;
	end = ktime_get_ns() + us * NSEC_PER_USEC;
	while (ktime_get_ns() < end)
		cpu_relax();
}

/* Host <-> chunk copy through a bounce buffer, one "DMA" per 64 KiB. */
static int mock_buf_copy(struct mock_dev *md, u64 handle, u64 ubuf, u64 size, u64 offset, bool to_dev)
{
	struct mem_chunk *mc = mock_chunk(md, handle);
	void __user *p = u64_to_user_ptr(ubuf);
	u64 done = 0;
	void *bounce;

	if (!mc || size > mc->size || offset > mc->size - size)
		return -EINVAL;
	if (to_dev)
		trace_ioctl_mem_copyin(&md->nd, mc, p, offset, size);
	else
		trace_ioctl_mem_copyout(&md->nd, mc, p, offset, size);
	bounce = kzalloc(MOCK_BOUNCE, GFP_KERNEL);
	if (!bounce)
		return -ENOMEM;
	while (done < size) {
		u64 n = min_t(u64, size - done, MOCK_BOUNCE);

		if (to_dev ? copy_from_user(bounce, p + done, n) : copy_to_user(p + done, bounce, n)) {
			kfree(bounce);
			return -EFAULT;
		}
		ndma_memcpy_wait_for_completion(md, n);
		done += n;
	}
	kfree(bounce);
	return 0;
}

static int mock_mem_copy(struct mock_dev *md, u64 src_h, u64 dst_h, u64 size, u64 src_off, u64 dst_off)
{
	struct mem_chunk *src = mock_chunk(md, src_h), *dst = mock_chunk(md, dst_h);

	if (!src || !dst || size > src->size || src_off > src->size - size || size > dst->size ||
	    dst_off > dst->size - size)
		return -EINVAL;
	ndma_memcpy_wait_for_completion(md, size);
	trace_ioctl_mem_copy(&md->nd, src, dst); /* after completion, as in the driver */
	return 0;
}

/* MEM_ALLOC*: size at +0, a user pointer receiving the handle at hptr_off. */
static int mock_mem_alloc(struct mock_dev *md, const void *arg, size_t hptr_off, u32 host)
{
	u64 size = *(const u64 *)arg, hptr = *(const u64 *)(arg + hptr_off), handle;
	struct mem_chunk *mc = NULL;
	int i;

	if (size == 0)
		return -EINVAL;
	mutex_lock(&md->lock);
	for (i = 0; i < MOCK_MAX_CHUNKS && !mc; i++)
		if (!md->chunks[i].in_use)
			mc = &md->chunks[i];
	if (mc) {
		memset(mc, 0, sizeof(*mc));
		mc->in_use = true;
		mc->size = size;
		mc->host_memory = host;
		mc->pa = 0x1000000000ull + (u64)(mc - md->chunks) * 0x100000000ull;
	}
	mutex_unlock(&md->lock);
	if (!mc)
		return -ENOMEM;
	handle = (mc - md->chunks) + 1;
	if (put_user(handle, (u64 __user *)u64_to_user_ptr(hptr))) {
		mc->in_use = false;
		return -EFAULT;
	}
	trace_ioctl_mem_alloc(&md->nd, mc);
	return 0;
}

static long ncdev_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct mock_dev *md = filp->private_data;
	void __user *uarg = (void __user *)arg;
	u8 small[64] __aligned(8);
	void *a = small;
	int size = mock_copied_size(cmd);
	long ret = 0;

	if (size < 0)
		return -ENOTTY;
	if (size > sizeof(small)) {
		a = kmalloc(size, GFP_KERNEL);
		if (!a)
			return -ENOMEM;
	}
	if (copy_from_user(a, uarg, size)) {
		ret = -EFAULT;
		goto out;
	}

	switch (cmd) {
	case NEURON_CMD_MEM_ALLOC: /* u64 size, u32 host_memory, ..., u64 *handle at 24 */
		ret = mock_mem_alloc(md, a, 24, *(u32 *)(a + 8));
		break;
	case NEURON_CMD_MEM_ALLOC_V2: /* u64 size, u64 align, u32 host_memory, ..., handle at 32 */
		ret = mock_mem_alloc(md, a, 32, *(u32 *)(a + 16));
		break;
	case NEURON_CMD_MEM_ALLOC_V2MT:
	case NEURON_CMD_MEM_ALLOC_V2MT64: {
		struct neuron_arg_mem_alloc_v2mt64 *p = a;

		ret = mock_mem_alloc(md, a, offsetof(struct neuron_arg_mem_alloc_v2mt64, mem_handle_ptr),
				     p->host_memory);
		break;
	}
	case NEURON_CMD_MEM_FREE: {
		struct mem_chunk *mc = mock_chunk(md, ((struct neuron_arg_mem_free *)a)->mem_handle);

		if (!mc) {
			ret = -EINVAL;
			break;
		}
		trace_ioctl_mem_alloc(&md->nd, mc); /* sic: the real driver emits alloc on free */
		mc->in_use = false;
		break;
	}
	case NEURON_CMD_MEM_BUF_COPY: {
		struct arg_mem_buf_copy *p = a;

		ret = mock_buf_copy(md, p->mem_handle, p->buffer, p->size, p->offset, p->copy_to_mem_handle);
		break;
	}
	case NEURON_CMD_MEM_BUF_COPY64:
	case NEURON_CMD_MEM_BUF_ZEROCOPY64: /* same first 40 bytes; no tracepoint in the driver */ {
		struct neuron_arg_mem_buf_copy64 *p = a;

		if (cmd == NEURON_CMD_MEM_BUF_COPY64)
			ret = mock_buf_copy(md, p->mem_handle, p->buffer, p->size, p->offset,
					    p->copy_to_mem_handle);
		else
			ndma_memcpy_wait_for_completion(md, p->size);
		break;
	}
	case NEURON_CMD_MEM_COPY: {
		struct arg_mem_copy *p = a;

		ret = mock_mem_copy(md, p->src_mem_handle, p->dst_mem_handle, p->size, p->src_offset,
				    p->dst_offset);
		break;
	}
	case NEURON_CMD_MEM_COPY64:
	case NEURON_CMD_MEM_COPY64_V2: {
		struct neuron_arg_mem_copy64 *p = a;

		ret = mock_mem_copy(md, p->src_mem_handle, p->dst_mem_handle, p->size, p->src_offset,
				    p->dst_offset);
		break;
	}
	case NEURON_CMD_PROGRAM_ENGINE_NC64: { /* instructions are read from user memory, then DMAed */
		struct neuron_arg_program_engine_nc64 *p = a;
		u8 probe;

		if (p->size && get_user(probe, (u8 __user *)u64_to_user_ptr(p->buffer))) {
			ret = -EFAULT;
			break;
		}
		ndma_memcpy_wait_for_completion(md, p->size);
		break;
	}
	case NEURON_CMD_DMA_QUEUE_INIT: {
		struct arg_dma_queue_init *p = a;

		trace_dma_queue_init(&md->nd, p->eng_id, p->qid, p->tx_desc_count, p->rx_desc_count,
				     mock_chunk(md, p->tx_handle), mock_chunk(md, p->rx_handle),
				     mock_chunk(md, p->rxc_handle), p->axi_port);
		break;
	}
	case NEURON_CMD_DMA_QUEUE_RELEASE: {
		struct arg_eng_qid *p = a;

		trace_dma_queue_release(&md->nd, p->eng_id, p->qid);
		break;
	}
	case NEURON_CMD_DMA_QUEUE_COPY_START: { /* the host doorbell: returns at once */
		struct neuron_arg_dma_queue_copy_start *p = a;

		trace_dma_queue_copy_start(&md->nd, p->eng_id, p->qid, p->tx_desc_count, p->rx_desc_count);
		break;
	}
	case NEURON_CMD_DMA_ACK_COMPLETED: {
		struct neuron_arg_dma_ack_completed *p = a;

		trace_dma_ack_completed(&md->nd, p->eng_id, p->qid, p->count);
		break;
	}
	default: /* known command, argument copied at its real size, nothing else to do */
		break;
	}
out:
	if (a != small)
		kfree(a);
	return ret;
}

static int ncdev_open(struct inode *inode, struct file *filp)
{
	unsigned int idx = iminor(inode);

	if (idx >= devices)
		return -ENODEV;
	filp->private_data = &mock_devs[idx];
	return 0;
}

static int ncdev_release(struct inode *inode, struct file *filp)
{
	return 0;
}

static const struct file_operations ncdev_fops = {
	.owner = THIS_MODULE,
	.open = ncdev_open,
	.release = ncdev_release,
	.unlocked_ioctl = ncdev_ioctl, /* no compat_ioctl, no poll: like the real driver */
};

/*
 * A stand-in for ib_uverbs with an EFA adapter behind it: a char region named
 * "infiniband_verbs" (minors from 192, like the real one) with one node,
 * uverbs0. It takes RDMA_VERBS_IOCTL and legacy write(2) commands, reads the
 * header like the real core does and sleeps like an admin command, so the
 * tracer's by-major uverbs path is exercised on every guest kernel.
 */
#define MOCK_UVERBS_MINOR 192
#define MOCK_RDMA_VERBS_IOCTL 0xc0181b01u
static dev_t mock_uverbs_devt;
static struct cdev mock_uverbs_cdev;
static struct class *mock_uverbs_class;

static long uverbs_mock_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct {
		__u16 length, object_id, method_id, num_attrs;
		__u64 reserved1;
		__u32 driver_id, reserved2;
	} hdr;

	if (cmd != MOCK_RDMA_VERBS_IOCTL)
		return -ENOTTY;
	if (copy_from_user(&hdr, (void __user *)arg, sizeof(hdr)))
		return -EFAULT;
	if (hdr.length != sizeof(hdr) + 16u * hdr.num_attrs)
		return -EINVAL;
	usleep_range(100, 200);
	return 0;
}

static ssize_t uverbs_mock_write(struct file *filp, const char __user *buf, size_t len, loff_t *pos)
{
	__u32 command;

	if (len < 8)
		return -EINVAL;
	if (copy_from_user(&command, buf, sizeof(command)))
		return -EFAULT;
	usleep_range(100, 200);
	return len;
}

static const struct file_operations uverbs_mock_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = uverbs_mock_ioctl,
	.write = uverbs_mock_write,
};

static int uverbs_mock_init(void)
{
	struct device *d;
	int ret = alloc_chrdev_region(&mock_uverbs_devt, MOCK_UVERBS_MINOR, 1, "infiniband_verbs");

	if (ret)
		return ret;
	cdev_init(&mock_uverbs_cdev, &uverbs_mock_fops);
	ret = cdev_add(&mock_uverbs_cdev, mock_uverbs_devt, 1);
	if (ret)
		goto err_region;
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 4, 0)
	mock_uverbs_class = class_create("infiniband_verbs");
#else
	mock_uverbs_class = class_create(THIS_MODULE, "infiniband_verbs");
#endif
	if (IS_ERR(mock_uverbs_class)) {
		ret = PTR_ERR(mock_uverbs_class);
		goto err_cdev;
	}
	d = device_create(mock_uverbs_class, NULL, mock_uverbs_devt, NULL, "uverbs0");
	if (IS_ERR(d)) {
		ret = PTR_ERR(d);
		class_destroy(mock_uverbs_class);
		goto err_cdev;
	}
	return 0;
err_cdev:
	cdev_del(&mock_uverbs_cdev);
err_region:
	unregister_chrdev_region(mock_uverbs_devt, 1);
	return ret;
}

static void uverbs_mock_exit(void)
{
	device_destroy(mock_uverbs_class, mock_uverbs_devt);
	class_destroy(mock_uverbs_class);
	cdev_del(&mock_uverbs_cdev);
	unregister_chrdev_region(mock_uverbs_devt, 1);
}

static int __init neuron_mock_init(void)
{
	unsigned int i;
	int ret;

	if (devices < 1 || devices > MOCK_MAX_DEVICES)
		return -EINVAL;
	mock_devs = kcalloc(devices, sizeof(*mock_devs), GFP_KERNEL);
	if (!mock_devs)
		return -ENOMEM;
	for (i = 0; i < devices; i++) {
		mock_devs[i].nd.device_index = i;
		mutex_init(&mock_devs[i].lock);
	}
	ret = alloc_chrdev_region(&mock_devt, 0, devices, "neuron");
	if (ret)
		goto err_free;
	cdev_init(&mock_cdev, &ncdev_fops);
	ret = cdev_add(&mock_cdev, mock_devt, devices);
	if (ret)
		goto err_region;
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 4, 0) /* 6.4 dropped class_create's owner argument */
	mock_class = class_create("neuron_device");
#else
	mock_class = class_create(THIS_MODULE, "neuron_device");
#endif
	if (IS_ERR(mock_class)) {
		ret = PTR_ERR(mock_class);
		goto err_cdev;
	}
	for (i = 0; i < devices; i++) {
		struct device *d = device_create(mock_class, NULL, MKDEV(MAJOR(mock_devt), i), NULL,
						 "neuron%u", i);
		if (IS_ERR(d)) {
			ret = PTR_ERR(d);
			while (i--)
				device_destroy(mock_class, MKDEV(MAJOR(mock_devt), i));
			goto err_class;
		}
	}
	ret = uverbs_mock_init();
	if (ret) {
		for (i = 0; i < devices; i++)
			device_destroy(mock_class, MKDEV(MAJOR(mock_devt), i));
		goto err_class;
	}
	pr_info("neuron (mock): %u device(s), char major %u; uverbs0 char major %u\n", devices, MAJOR(mock_devt),
		MAJOR(mock_uverbs_devt));
	return 0;

err_class:
	class_destroy(mock_class);
err_cdev:
	cdev_del(&mock_cdev);
err_region:
	unregister_chrdev_region(mock_devt, devices);
err_free:
	kfree(mock_devs);
	return ret;
}

static void __exit neuron_mock_exit(void)
{
	unsigned int i;

	uverbs_mock_exit();
	for (i = 0; i < devices; i++)
		device_destroy(mock_class, MKDEV(MAJOR(mock_devt), i));
	class_destroy(mock_class);
	cdev_del(&mock_cdev);
	unregister_chrdev_region(mock_devt, devices);
	kfree(mock_devs);
}

module_init(neuron_mock_init);
module_exit(neuron_mock_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Mock of the AWS Neuron driver's char device, ioctls and tracepoints (steptrace tests)");
