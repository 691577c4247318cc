/*
 * libxroce: the verbs library of xroce devices. Preloaded (LD_PRELOAD, `xroce run
 * -- APP`) into an unmodified libibverbs application, it defines the ibv_*
 * functions of rdma-core's <infiniband/verbs.h> (libibverbs/libibverbs.map.in's
 * versions, given by libxroce.map) so they interpose on libibverbs.so.1's, and
 * answers them by asking `xroce daemon` over its control socket
 * ($XROCE_RUN_DIR/NAME.sock, default /run/xroce; protocol in xroce_proto.h).
 * Structures are those of the installed <infiniband/verbs.h> (rdma-core 44).
 *
 * This increment: device list, open/close, query device (and _ex through
 * verbs_context), port, GID (and _ex, table, type), P_Key. Everything that
 * creates or uses PDs, MRs, CQs, QPs, SRQs, AHs and completion channels fails as
 * verbs says (NULL with errno EOPNOTSUPP, or EOPNOTSUPP returned). Pure helpers
 * (ibv_*_str, rate conversions, fork support, sysfs reads) stay libibverbs's own.
 * docs/verbs-library.md explains the choices.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "xroce_proto.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the control protocol is little-endian and this file copies it as it is"
#endif

/* verbs.h turns these names into inline wrappers; here they are the functions. */
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define XROCE_EXPORT __attribute__((visibility("default")))
#define XDEV_MAGIC 0x78646576u /* "xdev" */
#define XCTX_MAGIC 0x78637478u /* "xctx" */
#define DEFAULT_RUN_DIR "/run/xroce"
#define DEFAULT_TIMEOUT_MS 5000

/* xdev is one device a daemon serves. Devices live until the process exits: an
 * application may keep using context->device after ibv_free_device_list. */
struct xdev {
	struct ibv_device dev; /* first: the ibv_device pointer is the xdev pointer */
	uint32_t magic;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uint64_t guid;
	struct xdev *next;
};

/* xctx is an open device: one control-socket session. */
struct xctx {
	uint32_t magic;
	int fd;
	uint32_t seq;
	pthread_mutex_t lock;
	struct xdev *xd;
	struct verbs_context vctx; /* vctx.context is what the application holds */
};

static pthread_mutex_t devs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct xdev *devs;

static const char *run_dir(void)
{
	const char *d = getenv("XROCE_RUN_DIR");
	return d && *d ? d : DEFAULT_RUN_DIR;
}

static int timeout_ms(void)
{
	const char *t = getenv("XROCE_TIMEOUT_MS");
	int v = t ? atoi(t) : 0;
	return v > 0 ? v : DEFAULT_TIMEOUT_MS;
}

static void warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warnx(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "xroce: %s\n", buf);
}

/* xconnect opens a session with the daemon at path; -1 with errno on failure. */
static int xconnect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout_ms() / 1000, .tv_usec = (timeout_ms() % 1000) * 1000 };
	int fd, e;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/*
 * xcall sends one request and reads its reply into out, which must be exactly
 * outlen bytes (out may be NULL when outlen is 0). It returns 0 or an errno value:
 * the daemon's status, or ETIMEDOUT / ENODEV / EPROTO for a daemon that does not
 * answer, went away, or answered nonsense (each also printed, naming the socket).
 */
static int xcall(int fd, uint32_t *seqp, const char *path, uint16_t op,
		 const void *req, size_t reqlen, void *out, size_t outlen)
{
	unsigned char msg[XROCE_MAX_MESSAGE + 1];
	struct xroce_hdr h = { .op = op, .len = (uint16_t)reqlen, .seq = ++*seqp };
	int32_t status;
	ssize_t n;

	if (reqlen > XROCE_MAX_MESSAGE - XROCE_HDR_SIZE)
		return EINVAL;
	memcpy(msg, &h, sizeof(h));
	if (reqlen)
		memcpy(msg + sizeof(h), req, reqlen);
	do
		n = send(fd, msg, sizeof(h) + reqlen, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		warnx("the daemon at %s went away (%s): restart it with `xroce daemon -d IFACE`", path, strerror(errno));
		return ENODEV;
	}
	do
		n = recv(fd, msg, sizeof(msg), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		warnx("the daemon at %s did not answer in %d ms: is it alive? (`xroce daemon status`; XROCE_TIMEOUT_MS sets the wait)", path, timeout_ms());
		return ETIMEDOUT;
	}
	if (n <= 0) {
		warnx("the daemon at %s closed the session%s%s: restart it with `xroce daemon -d IFACE`",
		      path, n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
		return ENODEV;
	}
	memcpy(&h, msg, n >= (ssize_t)sizeof(h) ? sizeof(h) : 0);
	if (n < (ssize_t)(sizeof(h) + 4) || n > XROCE_MAX_MESSAGE || h.len != n - sizeof(h) ||
	    h.op != (op | XROCE_REPLY) || h.seq != *seqp) {
		warnx("the daemon at %s sent a malformed reply to op %u: are the library and daemon from one build?", path, op);
		return EPROTO;
	}
	memcpy(&status, msg + sizeof(h), 4);
	if (status != 0) {
		if (status != ENODATA && status != EINVAL)
			warnx("%s: %.*s", path, (int)(n - sizeof(h) - 4), (const char *)msg + sizeof(h) + 4);
		return status > 0 ? status : EPROTO;
	}
	if ((size_t)(n - sizeof(h) - 4) != outlen) {
		warnx("the daemon at %s sent a %zd-byte reply to op %u, want %zu: are the library and daemon from one build?",
		      path, n - sizeof(h) - 4, op, outlen);
		return EPROTO;
	}
	if (outlen)
		memcpy(out, msg + sizeof(h) + 4, outlen);
	return 0;
}

static struct xctx *to_xctx(struct ibv_context *ctx)
{
	struct xctx *xc;

	if (!ctx || ctx->abi_compat != __VERBS_ABI_IS_EXTENDED)
		return NULL;
	xc = (struct xctx *)((char *)ctx - offsetof(struct xctx, vctx.context));
	return xc->magic == XCTX_MAGIC ? xc : NULL;
}

static struct xdev *to_xdev(struct ibv_device *dev)
{
	struct xdev *xd = (struct xdev *)dev;
	return xd && xd->magic == XDEV_MAGIC ? xd : NULL;
}

/* ctx_call is xcall on an open device's session. */
static int ctx_call(struct xctx *xc, uint16_t op, const void *req, size_t reqlen, void *out, size_t outlen)
{
	int ret;

	pthread_mutex_lock(&xc->lock);
	ret = xcall(xc->fd, &xc->seq, xc->xd->path, op, req, reqlen, out, outlen);
	pthread_mutex_unlock(&xc->lock);
	return ret;
}

/* ---- device list ---------------------------------------------------------- */

/* probe says hello to the daemon at path; NULL when none answers there. */
static struct xdev *probe(const char *path)
{
	struct xroce_hello_req req = { .version = XROCE_PROTO_VERSION };
	struct xroce_hello_reply r;
	struct xdev *xd;
	uint32_t seq = 0;
	int fd, ret;

	fd = xconnect(path);
	if (fd < 0) {
		if (errno == EACCES)
			warnx("%s: permission denied: a daemon serves its own user and root unless started with --any-user", path);
		else if (errno != ECONNREFUSED && errno != ENOENT)
			warnx("%s: %s", path, strerror(errno));
		return NULL; /* ECONNREFUSED: a socket left by a daemon that died */
	}
	ret = xcall(fd, &seq, path, XROCE_OP_HELLO, &req, sizeof(req), &r, sizeof(r));
	close(fd);
	if (ret)
		return NULL;
	r.name[sizeof(r.name) - 1] = 0;
	pthread_mutex_lock(&devs_lock);
	for (xd = devs; xd; xd = xd->next)
		if (!strcmp(xd->path, path) && !strcmp(xd->dev.name, r.name))
			break;
	if (!xd) {
		xd = calloc(1, sizeof(*xd));
		if (xd) {
			xd->magic = XDEV_MAGIC;
			snprintf(xd->path, sizeof(xd->path), "%s", path);
			xd->dev.node_type = IBV_NODE_CA;
			xd->dev.transport_type = IBV_TRANSPORT_IB; /* as rdma_rxe: RoCE is IB transport */
			snprintf(xd->dev.name, sizeof(xd->dev.name), "%s", r.name);
			snprintf(xd->dev.dev_name, sizeof(xd->dev.dev_name), "%s", r.name);
			snprintf(xd->dev.dev_path, sizeof(xd->dev.dev_path), "%s", path);
			/* No sysfs: ibv_read_sysfs_file(ibdev_path, …) finds nothing here. */
			snprintf(xd->dev.ibdev_path, sizeof(xd->dev.ibdev_path), "%s/%s", run_dir(), r.name);
			xd->next = devs;
			devs = xd;
		}
	}
	if (xd)
		xd->guid = r.node_guid;
	pthread_mutex_unlock(&devs_lock);
	return xd;
}

static int by_name(const void *a, const void *b)
{
	return strcmp((*(struct ibv_device *const *)a)->name, (*(struct ibv_device *const *)b)->name);
}

/* ibv_get_device_list: the devices of the daemons in the run directory. */
XROCE_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	const char *dir = run_dir();
	struct ibv_device **list = NULL, **l;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;

	d = opendir(dir);
	while (d && (de = readdir(d))) {
		char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
		size_t len = strlen(de->d_name);
		struct xdev *xd;

		if (len < 6 || strcmp(de->d_name + len - 5, ".sock") ||
		    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		xd = probe(path);
		if (!xd)
			continue;
		if (n + 1 >= cap) {
			cap = cap ? 2 * cap : 8;
			l = realloc(list, cap * sizeof(*list));
			if (!l) {
				free(list);
				closedir(d);
				errno = ENOMEM;
				return NULL;
			}
			list = l;
		}
		list[n++] = &xd->dev;
	}
	if (d)
		closedir(d);
	if (!list && !(list = calloc(1, sizeof(*list)))) {
		errno = ENOMEM;
		return NULL;
	}
	list[n] = NULL;
	qsort(list, n, sizeof(*list), by_name);
	if (n == 0)
		warnx("no xroce device: no daemon answers in %s; start one with `xroce daemon -d IFACE` (XROCE_RUN_DIR sets the directory)", dir);
	if (num_devices)
		*num_devices = (int)n;
	return list;
}

XROCE_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list); /* the devices stay: see struct xdev */
}

XROCE_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device ? device->name : NULL;
}

XROCE_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	struct xdev *xd = to_xdev(device);
	return xd ? htobe64(xd->guid) : 0;
}

/* ibv_get_device_index: -1, "not known", as libibverbs returns without netlink. */
XROCE_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	(void)device;
	return -1;
}

/* ---- open and close --------------------------------------------------------- */

static int xq_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr, size_t attr_len);
static int xq_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *input,
			struct ibv_device_attr_ex *attr, size_t attr_size);

/* The data path of contexts without QPs or CQs: nothing can reach these yet. */
static int no_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	(void)cq, (void)n, (void)wc;
	return -EOPNOTSUPP;
}
static int no_req_notify_cq(struct ibv_cq *cq, int solicited)
{
	(void)cq, (void)solicited;
	return EOPNOTSUPP;
}
static int no_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	(void)qp;
	if (bad)
		*bad = wr;
	return EOPNOTSUPP;
}
static int no_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)qp;
	if (bad)
		*bad = wr;
	return EOPNOTSUPP;
}
static int no_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)srq;
	if (bad)
		*bad = wr;
	return EOPNOTSUPP;
}
static struct ibv_mw *no_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	(void)pd, (void)type;
	errno = EOPNOTSUPP;
	return NULL;
}
static int no_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
{
	(void)qp, (void)mw, (void)bind;
	return EOPNOTSUPP;
}
static int no_dealloc_mw(struct ibv_mw *mw)
{
	(void)mw;
	return EOPNOTSUPP;
}

XROCE_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct xroce_hello_req req = { .version = XROCE_PROTO_VERSION };
	struct xroce_hello_reply r;
	struct xdev *xd = to_xdev(device);
	struct ibv_context *ctx;
	struct xctx *xc;
	int ret;

	if (!xd) {
		errno = ENODEV;
		return NULL;
	}
	xc = calloc(1, sizeof(*xc));
	if (!xc) {
		errno = ENOMEM;
		return NULL;
	}
	xc->magic = XCTX_MAGIC;
	xc->xd = xd;
	pthread_mutex_init(&xc->lock, NULL);
	xc->fd = xconnect(xd->path);
	if (xc->fd < 0) {
		warnx("no xroce daemon at %s (%s): start one with `xroce daemon -d IFACE --name %s`", xd->path, strerror(errno), xd->dev.name);
		free(xc);
		errno = ENODEV;
		return NULL;
	}
	ret = xcall(xc->fd, &xc->seq, xd->path, XROCE_OP_HELLO, &req, sizeof(req), &r, sizeof(r));
	if (ret) {
		close(xc->fd);
		free(xc);
		errno = ret;
		return NULL;
	}
	ctx = &xc->vctx.context;
	ctx->device = device;
	ctx->cmd_fd = xc->fd;
	/* No asynchronous events are generated yet: an eventfd nobody signals. */
	ctx->async_fd = eventfd(0, EFD_CLOEXEC);
	if (ctx->async_fd < 0) {
		ret = errno;
		close(xc->fd);
		free(xc);
		errno = ret;
		return NULL;
	}
	ctx->num_comp_vectors = 1;
	pthread_mutex_init(&ctx->mutex, NULL);
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->ops.poll_cq = no_poll_cq;
	ctx->ops.req_notify_cq = no_req_notify_cq;
	ctx->ops.post_send = no_post_send;
	ctx->ops.post_recv = no_post_recv;
	ctx->ops.post_srq_recv = no_post_srq_recv;
	ctx->ops.alloc_mw = no_alloc_mw;
	ctx->ops.bind_mw = no_bind_mw;
	ctx->ops.dealloc_mw = no_dealloc_mw;
	/* verbs_get_ctx_op() sees the extended ops below; those left NULL make the
	 * inline _ex wrappers of verbs.h fail with EOPNOTSUPP / ENOSYS themselves. */
	xc->vctx.sz = sizeof(struct verbs_context);
	xc->vctx.query_port = xq_port;
	xc->vctx.query_device_ex = xq_device_ex;
	return ctx;
}

XROCE_EXPORT int ibv_close_device(struct ibv_context *context)
{
	struct xctx *xc = to_xctx(context);

	if (!xc)
		return EINVAL;
	xc->magic = 0;
	close(xc->fd);
	close(context->async_fd);
	pthread_mutex_destroy(&context->mutex);
	pthread_mutex_destroy(&xc->lock);
	free(xc);
	return 0;
}

/* ---- queries ------------------------------------------------------------------ */

static void fill_device_attr(struct ibv_device_attr *a, const struct xroce_device_attr *r)
{
	memset(a, 0, sizeof(*a));
	memcpy(a->fw_ver, r->fw_ver, sizeof(a->fw_ver));
	a->fw_ver[sizeof(a->fw_ver) - 1] = 0;
	a->node_guid = htobe64(r->node_guid);
	a->sys_image_guid = htobe64(r->sys_image_guid);
	a->max_mr_size = r->max_mr_size;
	a->page_size_cap = r->page_size_cap;
	a->vendor_id = r->vendor_id;
	a->vendor_part_id = r->vendor_part_id;
	a->hw_ver = r->hw_ver;
	a->max_qp = r->max_qp;
	a->max_qp_wr = r->max_qp_wr;
	a->device_cap_flags = r->device_cap_flags;
	a->max_sge = r->max_sge;
	a->max_sge_rd = r->max_sge_rd;
	a->max_cq = r->max_cq;
	a->max_cqe = r->max_cqe;
	a->max_mr = r->max_mr;
	a->max_pd = r->max_pd;
	a->max_qp_rd_atom = r->max_qp_rd_atom;
	a->max_ee_rd_atom = r->max_ee_rd_atom;
	a->max_res_rd_atom = r->max_res_rd_atom;
	a->max_qp_init_rd_atom = r->max_qp_init_rd_atom;
	a->max_ee_init_rd_atom = r->max_ee_init_rd_atom;
	a->atomic_cap = (enum ibv_atomic_cap)r->atomic_cap;
	a->max_ee = r->max_ee;
	a->max_rdd = r->max_rdd;
	a->max_mw = r->max_mw;
	a->max_raw_ipv6_qp = r->max_raw_ipv6_qp;
	a->max_raw_ethy_qp = r->max_raw_ethy_qp;
	a->max_mcast_grp = r->max_mcast_grp;
	a->max_mcast_qp_attach = r->max_mcast_qp_attach;
	a->max_total_mcast_qp_attach = r->max_total_mcast_qp_attach;
	a->max_ah = r->max_ah;
	a->max_fmr = r->max_fmr;
	a->max_map_per_fmr = r->max_map_per_fmr;
	a->max_srq = r->max_srq;
	a->max_srq_wr = r->max_srq_wr;
	a->max_srq_sge = r->max_srq_sge;
	a->max_pkeys = r->max_pkeys;
	a->local_ca_ack_delay = r->local_ca_ack_delay;
	a->phys_port_cnt = r->phys_port_cnt;
}

XROCE_EXPORT int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *device_attr)
{
	struct xctx *xc = to_xctx(context);
	struct xroce_device_attr r;
	int ret;

	if (!xc || !device_attr)
		return EINVAL;
	ret = ctx_call(xc, XROCE_OP_QUERY_DEVICE, NULL, 0, &r, sizeof(r));
	if (ret)
		return ret;
	fill_device_attr(device_attr, &r);
	return 0;
}

/* xq_device_ex is verbs_context.query_device_ex, which verbs.h's inline
 * ibv_query_device_ex calls (falling back to ibv_query_device when it is NULL). */
static int xq_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *input,
			struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct xctx *xc = to_xctx(ctx);
	struct xroce_device_attr r;
	struct ibv_device_attr_ex a;
	int ret;

	if (!xc || !attr || attr_size < sizeof(a.orig_attr))
		return EINVAL;
	if (input && input->comp_mask)
		return EINVAL;
	ret = ctx_call(xc, XROCE_OP_QUERY_DEVICE, NULL, 0, &r, sizeof(r));
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	fill_device_attr(&a.orig_attr, &r);
	a.completion_timestamp_mask = r.completion_timestamp_mask;
	a.hca_core_clock = r.hca_core_clock;
	a.device_cap_flags_ex = r.device_cap_flags_ex;
	/* An older caller's struct is a prefix of ours; a newer one's tail is zeroed. */
	if (attr_size > sizeof(a)) {
		memset((char *)attr + sizeof(a), 0, attr_size - sizeof(a));
		attr_size = sizeof(a);
	}
	memcpy(attr, &a, attr_size);
	return 0;
}

/* xq_port is verbs_context.query_port, which verbs.h's inline ibv_query_port
 * (___ibv_query_port) calls. */
static int xq_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr, size_t attr_len)
{
	struct xctx *xc = to_xctx(ctx);
	struct xroce_port_req req = { .port = port };
	struct xroce_port_attr r;
	struct ibv_port_attr a;
	int ret;

	if (!xc || !attr)
		return EINVAL;
	ret = ctx_call(xc, XROCE_OP_QUERY_PORT, &req, sizeof(req), &r, sizeof(r));
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.state = (enum ibv_port_state)r.state;
	a.max_mtu = (enum ibv_mtu)r.max_mtu;
	a.active_mtu = (enum ibv_mtu)r.active_mtu;
	a.gid_tbl_len = r.gid_tbl_len;
	a.port_cap_flags = r.port_cap_flags;
	a.max_msg_sz = r.max_msg_sz;
	a.bad_pkey_cntr = r.bad_pkey_cntr;
	a.qkey_viol_cntr = r.qkey_viol_cntr;
	a.pkey_tbl_len = r.pkey_tbl_len;
	a.lid = r.lid;
	a.sm_lid = r.sm_lid;
	a.lmc = r.lmc;
	a.max_vl_num = r.max_vl_num;
	a.sm_sl = r.sm_sl;
	a.subnet_timeout = r.subnet_timeout;
	a.init_type_reply = r.init_type_reply;
	a.active_width = r.active_width;
	a.active_speed = r.active_speed;
	a.phys_state = r.phys_state;
	a.link_layer = r.link_layer;
	a.flags = r.flags;
	a.port_cap_flags2 = r.port_cap_flags2;
	if (attr_len > sizeof(a)) {
		memset((char *)attr + sizeof(a), 0, attr_len - sizeof(a));
		attr_len = sizeof(a);
	}
	memcpy(attr, &a, attr_len);
	return 0;
}

/* ibv_query_port@IBVERBS_1.1: what binaries built against headers older than the
 * inline ___ibv_query_port call (verbs.h); today's call vctx->query_port. */
XROCE_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num,
				struct _compat_ibv_port_attr *port_attr)
{
	/* libibverbs/verbs.c's struct _compat_ibv_port_attr (opaque in verbs.h) is
	 * struct ibv_port_attr without its last field, port_cap_flags2. */
	return xq_port(context, port_num, (struct ibv_port_attr *)port_attr,
		       offsetof(struct ibv_port_attr, port_cap_flags2));
}

/* query_gid_entry reads one slot: 0, ENODATA for an empty slot, or an errno value. */
static int query_gid_entry(struct ibv_context *context, uint32_t port, uint32_t index, struct xroce_gid_reply *r)
{
	struct xctx *xc = to_xctx(context);
	struct xroce_gid_req req = { .port = port, .index = index };
	int ret;

	if (!xc)
		return EINVAL;
	ret = ctx_call(xc, XROCE_OP_QUERY_GID, &req, sizeof(req), r, sizeof(*r));
	if (ret)
		return ret;
	return r->valid ? 0 : ENODATA;
}

/* ibv_query_gid: an empty slot reads as the zero GID, as libibverbs/verbs.c does. */
XROCE_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid)
{
	struct xroce_gid_reply r;
	int ret;

	if (index < 0 || !gid) {
		errno = EINVAL;
		return -1;
	}
	ret = query_gid_entry(context, port_num, (uint32_t)index, &r);
	if (ret == ENODATA) {
		memset(gid, 0, sizeof(*gid));
		return 0;
	}
	if (ret) {
		errno = ret;
		return -1;
	}
	memcpy(gid->raw, r.raw, sizeof(gid->raw));
	return 0;
}

/* _ibv_query_gid_ex, behind verbs.h's inline ibv_query_gid_ex: ENODATA for an
 * empty slot (libibverbs/cmd_device.c). */
XROCE_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index,
				   struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	struct xroce_gid_reply r;
	struct ibv_gid_entry e = {};
	int ret;

	if (!entry || entry_size < sizeof(e))
		return EINVAL;
	if (flags)
		return EOPNOTSUPP;
	ret = query_gid_entry(context, port_num, gid_index, &r);
	if (ret)
		return ret;
	memcpy(e.gid.raw, r.raw, sizeof(e.gid.raw));
	e.gid_index = gid_index;
	e.port_num = port_num;
	e.gid_type = r.type;
	e.ndev_ifindex = r.ifindex;
	memset(entry, 0, entry_size);
	memcpy(entry, &e, sizeof(e));
	return 0;
}

/* _ibv_query_gid_table, behind ibv_query_gid_table: the valid entries of every
 * port, or a negative errno value. */
XROCE_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
					  size_t max_entries, uint32_t flags, size_t entry_size)
{
	struct xroce_gid_reply r;
	size_t n = 0;
	uint32_t i;
	int ret;

	if (!to_xctx(context) || entry_size < sizeof(struct ibv_gid_entry))
		return -EINVAL;
	if (flags)
		return -EOPNOTSUPP;
	for (i = 0;; i++) {
		struct ibv_gid_entry *e = (struct ibv_gid_entry *)((char *)entries + n * entry_size);

		ret = query_gid_entry(context, 1, i, &r);
		if (ret == ENODATA || ret == EINVAL)
			break; /* the table has no holes: the first empty slot ends it */
		if (ret)
			return -ret;
		if (n >= max_entries)
			return -EINVAL;
		memset(e, 0, entry_size);
		memcpy(e->gid.raw, r.raw, sizeof(e->gid.raw));
		e->gid_index = i;
		e->port_num = 1;
		e->gid_type = r.type;
		e->ndev_ifindex = r.ifindex;
		n++;
	}
	return (ssize_t)n;
}

/* The values of rdma-core's private enum ibv_gid_type_sysfs (libibverbs/driver.h,
 * not installed by libibverbs-dev). */
enum {
	GID_TYPE_SYSFS_IB_ROCE_V1 = 0,
	GID_TYPE_SYSFS_ROCE_V2 = 1,
};

int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index, int *type);

/* ibv_query_gid_type@IBVERBS_PRIVATE_34, which ibv_devinfo calls: the sysfs
 * flavour of the type (RoCE v1 for IB and v1 GIDs and empty slots). */
XROCE_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
				    unsigned int index, int *type)
{
	struct xroce_gid_reply r;
	int ret;

	ret = query_gid_entry(context, port_num, index, &r);
	if (ret == ENODATA) {
		*type = GID_TYPE_SYSFS_IB_ROCE_V1;
		return 0;
	}
	if (ret) {
		errno = ret;
		return -1;
	}
	*type = r.type == IBV_GID_TYPE_ROCE_V2 ? GID_TYPE_SYSFS_ROCE_V2 : GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}

/* ibv_query_pkey: rdma_rxe's one-entry P_Key table holds the default 0xffff. */
XROCE_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index, __be16 *pkey)
{
	if (!to_xctx(context) || port_num != 1 || index != 0 || !pkey) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(0xffff);
	return 0;
}

XROCE_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	__be16 p;

	if (ibv_query_pkey(context, port_num, 0, &p))
		return -1;
	return p == pkey ? 0 : -1;
}

/* ---- asynchronous events -------------------------------------------------------- */

/* ibv_get_async_event blocks until an event arrives, as libibverbs's does; this
 * increment generates none, so it blocks (or fails with EAGAIN on an async_fd the
 * application made non-blocking). */
XROCE_EXPORT int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	uint64_t v;
	ssize_t n;

	if (!to_xctx(context) || !event) {
		errno = EINVAL;
		return -1;
	}
	n = read(context->async_fd, &v, sizeof(v));
	if (n < 0)
		return -1;
	errno = EIO;
	return -1;
}

XROCE_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	(void)event;
}

/* ---- not yet: every verb that makes or uses PDs, MRs, CQs, QPs, SRQs, AHs ------ */

#define FAIL_PTR(ret, name, ...)                        \
	XROCE_EXPORT ret name(__VA_ARGS__)              \
	{                                               \
		errno = EOPNOTSUPP;                     \
		return NULL;                            \
	}
#define FAIL_INT(name, ...)                             \
	XROCE_EXPORT int name(__VA_ARGS__)              \
	{                                               \
		return EOPNOTSUPP;                      \
	}
#define FAIL_NEG(name, ...)                             \
	XROCE_EXPORT int name(__VA_ARGS__)              \
	{                                               \
		errno = EOPNOTSUPP;                     \
		return -1;                              \
	}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
FAIL_PTR(struct ibv_pd *, ibv_alloc_pd, struct ibv_context *context)
FAIL_INT(ibv_dealloc_pd, struct ibv_pd *pd)
FAIL_PTR(struct ibv_mr *, ibv_reg_mr, struct ibv_pd *pd, void *addr, size_t length, int access)
FAIL_PTR(struct ibv_mr *, ibv_reg_mr_iova, struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access)
FAIL_PTR(struct ibv_mr *, ibv_reg_mr_iova2, struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
FAIL_PTR(struct ibv_mr *, ibv_reg_dmabuf_mr, struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access)
FAIL_INT(ibv_rereg_mr, struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length, int access)
FAIL_INT(ibv_dereg_mr, struct ibv_mr *mr)
FAIL_PTR(struct ibv_comp_channel *, ibv_create_comp_channel, struct ibv_context *context)
FAIL_INT(ibv_destroy_comp_channel, struct ibv_comp_channel *channel)
FAIL_PTR(struct ibv_cq *, ibv_create_cq, struct ibv_context *context, int cqe, void *cq_context, struct ibv_comp_channel *channel, int comp_vector)
FAIL_INT(ibv_resize_cq, struct ibv_cq *cq, int cqe)
FAIL_INT(ibv_destroy_cq, struct ibv_cq *cq)
FAIL_NEG(ibv_get_cq_event, struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
FAIL_PTR(struct ibv_srq *, ibv_create_srq, struct ibv_pd *pd, struct ibv_srq_init_attr *srq_init_attr)
FAIL_INT(ibv_modify_srq, struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, int srq_attr_mask)
FAIL_INT(ibv_query_srq, struct ibv_srq *srq, struct ibv_srq_attr *srq_attr)
FAIL_INT(ibv_destroy_srq, struct ibv_srq *srq)
FAIL_PTR(struct ibv_qp *, ibv_create_qp, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
FAIL_INT(ibv_query_qp, struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask, struct ibv_qp_init_attr *init_attr)
FAIL_INT(ibv_modify_qp, struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
FAIL_INT(ibv_destroy_qp, struct ibv_qp *qp)
FAIL_PTR(struct ibv_qp_ex *, ibv_qp_to_qp_ex, struct ibv_qp *qp)
FAIL_INT(ibv_query_qp_data_in_order, struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
FAIL_INT(ibv_query_ece, struct ibv_qp *qp, struct ibv_ece *ece)
FAIL_INT(ibv_set_ece, struct ibv_qp *qp, struct ibv_ece *ece)
FAIL_PTR(struct ibv_ah *, ibv_create_ah, struct ibv_pd *pd, struct ibv_ah_attr *attr)
FAIL_INT(ibv_destroy_ah, struct ibv_ah *ah)
FAIL_PTR(struct ibv_ah *, ibv_create_ah_from_wc, struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh, uint8_t port_num)
FAIL_NEG(ibv_init_ah_from_wc, struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc, struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
FAIL_INT(ibv_attach_mcast, struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
FAIL_INT(ibv_detach_mcast, struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
FAIL_NEG(ibv_resolve_eth_l2_from_gid, struct ibv_context *context, struct ibv_ah_attr *attr, uint8_t eth_mac[6], uint16_t *vid)
FAIL_PTR(struct ibv_context *, ibv_import_device, int cmd_fd)
FAIL_PTR(struct ibv_pd *, ibv_import_pd, struct ibv_context *context, uint32_t pd_handle)
FAIL_PTR(struct ibv_mr *, ibv_import_mr, struct ibv_pd *pd, uint32_t mr_handle)
FAIL_PTR(struct ibv_dm *, ibv_import_dm, struct ibv_context *context, uint32_t dm_handle)
#pragma GCC diagnostic pop

/* Teardown of objects that cannot exist yet does nothing. */
XROCE_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	(void)cq, (void)nevents;
}
XROCE_EXPORT void ibv_unimport_pd(struct ibv_pd *pd) { (void)pd; }
XROCE_EXPORT void ibv_unimport_mr(struct ibv_mr *mr) { (void)mr; }
XROCE_EXPORT void ibv_unimport_dm(struct ibv_dm *dm) { (void)dm; }
