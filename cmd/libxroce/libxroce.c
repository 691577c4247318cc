/*
 * libxroce: the verbs library of xroce devices. Preloaded (LD_PRELOAD, `xroce run
 * -- APP`) into an unmodified libibverbs application, it defines the ibv_*
 * functions of rdma-core's <infiniband/verbs.h> (libibverbs/libibverbs.map.in's
 * versions, given by libxroce.map) so they interpose on libibverbs.so.1's, and
 * answers them by asking `xroce daemon` over its control socket
 * ($XROCE_RUN_DIR/NAME.sock, default /run/xroce; protocol in xroce_proto.h).
 * Structures are those of the installed <infiniband/verbs.h> (rdma-core 44).
 *
 * Served: device list, open/close, query device (and _ex through verbs_context),
 * port, GID (and _ex, table, type), P_Key; PDs, MRs (the registered pages moved
 * onto a memfd the daemon maps), completion channels, CQs, RC QPs, posting and
 * polling through context->ops on shared-memory rings (rings.c), extended RC QPs
 * (verbs_context.create_qp_ex, ibv_qp_to_qp_ex) and their ibv_wr_* builder, and
 * asynchronous events. SRQs, AHs and extended CQs fail as verbs says (NULL with
 * errno EOPNOTSUPP, or EOPNOTSUPP returned). Pure helpers (ibv_*_str, rate
 * conversions, fork support, sysfs reads) stay libibverbs's own.
 * docs/verbs-library.md explains the choices.
 */
#include "libxroce.h"

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

void warnx(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "xroce: %s\n", buf);
}

/* unsupported says once per process, on the first call of a verb xroce does not
 * implement that an application needs to go on (an SRQ, a memory window, an MR
 * with flags it lacks), what is missing; the verb then fails with EOPNOTSUPP. An
 * application that only probes and falls back sees one line. */
void unsupported(int *said, const char *what)
{
	if (!__atomic_exchange_n(said, 1, __ATOMIC_RELAXED))
		warnx("xroce does not support %s: it fails with EOPNOTSUPP (the README's \"Unmodified applications\" lists the verbs)", what);
	errno = EOPNOTSUPP;
}

/* x_open_xrcd is verbs_context's open_xrcd: XRC is missing, as on rdma_rxe (which
 * sets no open_xrcd, so libibverbs' ibv_open_xrcd fails with EOPNOTSUPP): the same
 * NULL and errno, and one line saying so. */
static struct ibv_xrcd *x_open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *attr)
{
	static int said;

	(void)context;
	(void)attr;
	unsupported(&said, "XRC domains (ibv_open_xrcd; rdma_rxe has no XRC either)");
	return NULL;
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

/* status_ok: the reply in msg (n bytes) has a header and status 0. */
static int status_ok(const unsigned char *msg, ssize_t n)
{
	int32_t st;

	if (n < (ssize_t)(sizeof(struct xroce_hdr) + 4))
		return 0;
	memcpy(&st, msg + sizeof(struct xroce_hdr), 4);
	return st == 0;
}

static void close_fds(int *fds, int n)
{
	int i;

	for (i = 0; i < n; i++)
		close(fds[i]);
}

/* recv_fds takes the descriptors a reply carried: exactly want of them into
 * fds (0, or EPROTO with all of them closed). */
static int recv_fds(struct msghdr *mh, int *fds, int want)
{
	struct cmsghdr *c;
	int got = 0, i, n, f;

	for (c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (i = 0; i < n; i++) {
			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (got < want)
				fds[got] = f;
			else
				close(f);
			got++;
		}
	}
	if (got == want && !(mh->msg_flags & MSG_CTRUNC))
		return 0;
	for (i = 0; i < got && i < want; i++)
		close(fds[i]);
	return EPROTO;
}

/*
 * xcall_ex sends one request, with the descriptor sendfd (SCM_RIGHTS) when it is
 * not -1, and reads its reply body into out (at most outmax bytes; *outlen gets
 * the length, or it must be exactly outmax when outlen is NULL) and the nrecv
 * descriptors the reply carries into recvfds (when it succeeds). It returns 0 or
 * an errno value: the daemon's status, or ETIMEDOUT / ENODEV / EPROTO for a daemon
 * that does not answer, went away, or answered nonsense (each also printed,
 * naming the socket).
 */
static int xcall_ex(int fd, uint32_t *seqp, const char *path, uint16_t op, const void *req, size_t reqlen,
		    const int *sendfds, int nsend, void *out, size_t outmax, size_t *outlen, int *recvfds, int nrecv)
{
	unsigned char msg[XROCE_MAX_MESSAGE + 1];
	struct xroce_hdr h = { .op = op, .len = (uint16_t)reqlen, .seq = ++*seqp };
	union {
		char buf[CMSG_SPACE(XROCE_MR_PIECES * sizeof(int))];
		struct cmsghdr align;
	} cm, rcm;
	struct iovec iov;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int32_t status;
	size_t blen;
	ssize_t n;
	int ret;

	if (reqlen > XROCE_MAX_MESSAGE - XROCE_HDR_SIZE)
		return EINVAL;
	memcpy(msg, &h, sizeof(h));
	if (reqlen)
		memcpy(msg + sizeof(h), req, reqlen);
	iov.iov_base = msg;
	iov.iov_len = sizeof(h) + reqlen;
	if (nsend > 0) {
		struct cmsghdr *c;

		if (nsend > XROCE_MR_PIECES)
			return EINVAL;
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE(nsend * sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nsend * sizeof(int));
		memcpy(CMSG_DATA(c), sendfds, nsend * sizeof(int));
	}
	do
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		warnx("the daemon at %s went away (%s): restart it with `xroce daemon -d IFACE`", path, strerror(errno));
		return ENODEV;
	}
	iov.iov_base = msg;
	iov.iov_len = sizeof(msg);
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = rcm.buf;
	mh.msg_controllen = sizeof(rcm.buf);
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	ret = n > 0 ? recv_fds(&mh, recvfds, status_ok(msg, n) ? nrecv : 0) : 0;
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
	if (ret || n < (ssize_t)(sizeof(h) + 4) || n > XROCE_MAX_MESSAGE || h.len != n - sizeof(h) ||
	    h.op != (op | XROCE_REPLY) || h.seq != *seqp) {
		if (!ret)
			close_fds(recvfds, status_ok(msg, n) ? nrecv : 0);
		warnx("the daemon at %s sent a malformed reply to op %u: are the library and daemon from one build?", path, op);
		return EPROTO;
	}
	memcpy(&status, msg + sizeof(h), 4);
	if (status != 0) {
		/* Expected answers (an empty GID slot, a bad argument, a busy object) are
		 * the caller's to report; XROCE_DEBUG prints the daemon's reason for them.
		 * A refused QP transition always says why (a path MTU or GID the link
		 * cannot take): applications only print "Failed to modify QP". */
		if ((status != ENODATA && status != EINVAL && status != EBUSY) || op == XROCE_OP_MODIFY_QP || op == XROCE_OP_CREATE_AH ||
		    (op >= XROCE_OP_CM_CREATE_ID && op <= XROCE_OP_CM_DISCONNECT) || getenv("XROCE_DEBUG"))
			warnx("%s: %.*s", path, (int)(n - sizeof(h) - 4), (const char *)msg + sizeof(h) + 4);
		return status > 0 ? status : EPROTO;
	}
	blen = n - sizeof(h) - 4;
	if (outlen ? blen > outmax : blen != outmax) {
		close_fds(recvfds, nrecv);
		warnx("the daemon at %s sent a %zu-byte reply to op %u, want %s%zu: are the library and daemon from one build?",
		      path, blen, op, outlen ? "at most " : "", outmax);
		return EPROTO;
	}
	if (blen)
		memcpy(out, msg + sizeof(h) + 4, blen);
	if (outlen)
		*outlen = blen;
	return 0;
}

/* xcall is xcall_ex without a descriptor, for a reply of exactly outlen bytes. */
static int xcall(int fd, uint32_t *seqp, const char *path, uint16_t op,
		 const void *req, size_t reqlen, void *out, size_t outlen)
{
	return xcall_ex(fd, seqp, path, op, req, reqlen, NULL, 0, out, outlen, NULL, NULL, 0);
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

/* hung_up reports whether the daemon closed its end of the session socket fd. */
int hung_up(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

/* ctx_call_fds is xcall_ex on an open device's session: the nsend descriptors
 * sendfds go with the request, nrecv descriptors come with a successful reply.
 * Once the daemon has gone away (said once, by xcall_ex, daemon_gone or
 * read_channel; threads that notice it at the same moment may each say it), every
 * call fails with EIO at once, as ib_uverbs fails every
 * command on a context it disassociated from a removed device, and says nothing
 * more: an
 * application that retries in a loop (UCX polls its event channel and rearms its
 * CQs) printed the message thousands of times a second. errno is set to a failure's
 * value too, since applications print errno (%m) after a verb that returns one. */
int ctx_call_fds(struct xctx *xc, uint16_t op, const void *req, size_t reqlen, const int *sendfds, int nsend,
			void *out, size_t outlen, int *recvfds, int nrecv)
{
	int ret = EIO;

	pthread_mutex_lock(&xc->lock);
	if (!__atomic_load_n(&xc->gone, __ATOMIC_RELAXED)) {
		ret = xcall_ex(xc->fd, &xc->seq, xc->xd->path, op, req, reqlen, sendfds, nsend, out, outlen, NULL, recvfds, nrecv);
		if (ret == ENODEV && hung_up(xc->fd)) { /* not the daemon's own ENODEV status */
			__atomic_store_n(&xc->gone, 1, __ATOMIC_RELAXED);
			ret = EIO;
		}
	}
	pthread_mutex_unlock(&xc->lock);
	if (ret)
		errno = ret;
	return ret;
}

/* destroy_failed reports whether a destroy verb's call failed for a reason that
 * keeps the object: not when the daemon is gone, whose objects went with it; the
 * library then frees its side and the verb succeeds, as rdma-core's destroys
 * succeed on a context disassociated from a removed device. */
int destroy_failed(struct xctx *xc, int ret)
{
	return ret && !__atomic_load_n(&xc->gone, __ATOMIC_RELAXED);
}

/* ctx_call is ctx_call_fds without descriptors. */
int ctx_call(struct xctx *xc, uint16_t op, const void *req, size_t reqlen, void *out, size_t outlen)
{
	return ctx_call_fds(xc, op, req, reqlen, NULL, 0, out, outlen, NULL, 0);
}

/* ---- device list ---------------------------------------------------------- */

/* peer_netns tells, for the daemon at the other end of fd, whether it runs in this
 * process's network namespace: 0 yes, 2 in another, 1 when that cannot be told
 * (another user's daemon, or one in another PID namespace: SO_PEERCRED's pid and
 * /proc say nothing then). */
static int peer_netns(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	char path[64], mine[64], theirs[64];
	ssize_t a, b;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) || cr.pid <= 0)
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)cr.pid);
	a = readlink("/proc/self/ns/net", mine, sizeof(mine));
	b = readlink(path, theirs, sizeof(theirs));
	if (a <= 0 || b <= 0 || a == (ssize_t)sizeof(mine) || b == (ssize_t)sizeof(theirs))
		return 1;
	return a == b && !memcmp(mine, theirs, (size_t)a) ? 0 : 2;
}

/* probe says hello to the daemon at path; NULL when none answers there, and then
 * *refused counts a daemon that does not serve this user (said once, by the
 * caller, when no device is left). */
static struct xdev *probe(const char *path, int *refused)
{
	struct xroce_hello_req req = { .version = XROCE_PROTO_VERSION };
	struct xroce_hello_reply r;
	struct xdev *xd;
	uint32_t seq = 0;
	int fd, ret, netns;

	fd = xconnect(path);
	if (fd < 0) {
		if (errno == EACCES)
			(*refused)++;
		else if (errno != ECONNREFUSED && errno != ENOENT)
			warnx("%s: %s", path, strerror(errno));
		return NULL; /* ECONNREFUSED: a socket left by a daemon that died */
	}
	ret = xcall(fd, &seq, path, XROCE_OP_HELLO, &req, sizeof(req), &r, sizeof(r));
	netns = peer_netns(fd);
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
			snprintf(xd->ifname, sizeof(xd->ifname), "%.*s", (int)sizeof(r.ifname), r.ifname);
			snprintf(xd->dev.dev_name, sizeof(xd->dev.dev_name), "%s", r.name);
			snprintf(xd->dev.dev_path, sizeof(xd->dev.dev_path), "%s", path);
			/* No sysfs: ibv_read_sysfs_file(ibdev_path, …) finds nothing here. */
			snprintf(xd->dev.ibdev_path, sizeof(xd->dev.ibdev_path), "%s/%s", run_dir(), r.name);
			xd->next = devs;
			devs = xd;
		}
	}
	if (xd) {
		xd->guid = r.node_guid;
		xd->netns = netns;
	}
	pthread_mutex_unlock(&devs_lock);
	return xd;
}

/* by_netns_name orders the device list: the devices of daemons in this process's
 * network namespace first, so that an application taking the first device
 * (perftest and ibv_rc_pingpong without -d) uses its own namespace's interface;
 * then by name. The others stay listed, as the kernel's RDMA devices are in every
 * namespace in its default (shared) netns mode. */
static int by_netns_name(const void *a, const void *b)
{
	const struct ibv_device *da = *(struct ibv_device *const *)a, *db = *(struct ibv_device *const *)b;
	int na = ((const struct xdev *)da)->netns, nb = ((const struct xdev *)db)->netns;

	return na != nb ? na - nb : strcmp(da->name, db->name);
}

/* ibv_get_device_list: the devices of the daemons in the run directory. */
XROCE_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	const char *dir = run_dir();
	struct ibv_device **list = NULL, **l;
	size_t n = 0, cap = 0;
	int refused = 0;
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
		xd = probe(path, &refused);
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
	qsort(list, n, sizeof(*list), by_netns_name);
	if (n == 0 && refused)
		warnx("no xroce device for this user: %d daemon%s in %s serve%s only %s own user and root; start %s with --any-user",
		      refused, refused > 1 ? "s" : "", dir, refused > 1 ? "" : "s", refused > 1 ? "their" : "its",
		      refused > 1 ? "them" : "it");
	else if (n == 0)
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

static int x_req_notify_cq(struct ibv_cq *cq, int solicited);
static struct ibv_qp *x_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr);
static struct ibv_cq_ex *x_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr);

/* No memory windows: nothing can reach these. */
static struct ibv_mw *no_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	static int said;

	(void)pd, (void)type;
	unsupported(&said, "memory windows (ibv_alloc_mw)");
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

/* async_channel gives the daemon one end of a socketpair for the session's
 * asynchronous events and keeps the other as context->async_fd. */
static int async_channel(struct xctx *xc)
{
	int sv[2], ret;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return errno;
	ret = xcall_ex(xc->fd, &xc->seq, xc->xd->path, XROCE_OP_ASYNC_CHANNEL, NULL, 0, &sv[1], 1, NULL, 0, NULL, NULL, 0);
	close(sv[1]);
	if (ret) {
		close(sv[0]);
		return ret;
	}
	xc->vctx.context.async_fd = sv[0];
	return 0;
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
	pthread_mutex_init(&xc->objs, NULL);
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
	/* Asynchronous events come on a socketpair whose other end the daemon holds. */
	if ((ret = async_channel(xc)) != 0) {
		close(xc->fd);
		free(xc);
		errno = ret;
		return NULL;
	}
	ctx->num_comp_vectors = 1;
	pthread_mutex_init(&ctx->mutex, NULL);
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->ops.poll_cq = x_poll_cq;
	ctx->ops.req_notify_cq = x_req_notify_cq;
	ctx->ops.post_send = x_post_send;
	ctx->ops.post_recv = x_post_recv;
	ctx->ops.post_srq_recv = x_post_srq_recv;
	ctx->ops.alloc_mw = no_alloc_mw;
	ctx->ops.bind_mw = no_bind_mw;
	ctx->ops.dealloc_mw = no_dealloc_mw;
	/* verbs_get_ctx_op() sees the extended ops below; those left NULL make the
	 * inline _ex wrappers of verbs.h fail with EOPNOTSUPP / ENOSYS themselves. */
	xc->vctx.sz = sizeof(struct verbs_context);
	xc->vctx.query_port = xq_port;
	xc->vctx.query_device_ex = xq_device_ex;
	xc->vctx.create_qp_ex = x_create_qp_ex;
	xc->vctx.create_cq_ex = x_create_cq_ex;
	xc->vctx.open_xrcd = x_open_xrcd;
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
	pthread_mutex_destroy(&xc->objs);
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
#ifdef XROCE_TEST_VENDOR_PART_ID
	/* Test builds only (cmd/xroce/verbs_test.go TestVerbsPerftestWrAPI): perftest
	 * 4.5 takes its ibv_wr_* path only on devices it knows by vendor_part_id. */
	a->vendor_part_id = XROCE_TEST_VENDOR_PART_ID;
#endif
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
 * port, skipping empty slots (a removed address leaves one) as the kernel's
 * ib_uverbs query does, or a negative errno value. */
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
		if (ret == EINVAL)
			break; /* past gid_tbl_len */
		if (ret == ENODATA)
			continue; /* an empty slot: a removed address's, or past the last entry */
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

/* read_channel reads one message from a channel the daemon writes (a completion
 * or the event channel): its length, or -1 with errno (ENODEV, said once, when
 * the daemon closed it). */
static ssize_t read_channel(struct xctx *xc, int fd, void *buf, size_t len, const char *what)
{
	/* A signal ends the wait with EINTR, as libibverbs' read of the channel does:
	 * qperf stops its test with SIGALRM while blocked in ibv_get_cq_event. */
	ssize_t n = read(fd, buf, len);

	if (n == 0) {
		if (!__atomic_exchange_n(&xc->gone, 1, __ATOMIC_RELAXED))
			warnx("the daemon at %s closed the %s channel: restart it with `xroce daemon -d IFACE`", xc->xd->path, what);
		errno = ENODEV;
		return -1;
	}
	return n;
}

/* async_target finds the QP, CQ or SRQ of this context an event's cookie names,
 * or the port a port event's cookie numbers, and stores it in event; 0 when the
 * object is gone (the event is skipped). */
static int async_target(struct xctx *xc, const struct xroce_async_event *e, struct ibv_async_event *event)
{
	struct xcq *c;
	struct xqp *q;
	struct xsrq *s;
	int i, found = 0;

	switch (e->type) {
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		/* a port's event: the cookie is the port number */
		event->element.port_num = (int)e->cookie;
		return 1;
	default:
		break;
	}
	pthread_mutex_lock(&xc->objs);
	if (e->type == IBV_EVENT_CQ_ERR) {
		for (c = xc->cqs; c && (uintptr_t)c != e->cookie; c = c->next)
			;
		if (c) {
			event->element.cq = &c->cq;
			found = 1;
		}
	} else if (e->type == IBV_EVENT_SRQ_LIMIT_REACHED || e->type == IBV_EVENT_SRQ_ERR) {
		for (s = xc->srqs; s && (uintptr_t)s != e->cookie; s = s->next)
			;
		if (s) {
			event->element.srq = &s->srq;
			found = 1;
		}
	} else {
		for (i = 0; i < QP_BUCKETS && !found; i++)
			for (q = xc->qps[i]; q; q = q->hnext)
				if ((uintptr_t)q == e->cookie) {
					event->element.qp = &q->qp;
					found = 1;
					break;
				}
	}
	pthread_mutex_unlock(&xc->objs);
	return found;
}

/* ibv_get_async_event blocks until the daemon reports an event of this
 * context's (IBV_EVENT_CQ_ERR for a completion a CQ overrun lost, a QP's
 * IBV_EVENT_SQ_DRAINED, an SRQ's limit, the port's IBV_EVENT_PORT_ACTIVE,
 * _PORT_ERR and _GID_CHANGE), as libibverbs's does, or fails with EAGAIN on an
 * async_fd the application made non-blocking. When the daemon went away it
 * returns IBV_EVENT_DEVICE_FATAL once and then fails with EIO, as for a kernel
 * device that was removed (ib_uverbs queues DEVICE_FATAL on the async file when
 * it disassociates a context; reads after that fail with EIO). */
XROCE_EXPORT int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	struct xroce_async_event e;
	struct xctx *xc = to_xctx(context);
	ssize_t n;

	if (!xc || !event) {
		errno = EINVAL;
		return -1;
	}
	if (xc->fatal) {
		errno = EIO;
		return -1;
	}
	for (;;) {
		if ((n = read_channel(xc, context->async_fd, &e, sizeof(e), "event")) < 0) {
			if (errno != ENODEV)
				return -1;
			xc->fatal = 1;
			memset(event, 0, sizeof(*event));
			event->event_type = IBV_EVENT_DEVICE_FATAL;
			return 0;
		}
		memset(event, 0, sizeof(*event));
		event->event_type = (enum ibv_event_type)e.type;
		if (n == sizeof(e) && async_target(xc, &e, event))
			return 0;
	}
}

XROCE_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	(void)event;
}

/* ---- objects: PD, MR, completion channels, CQ, QP ---------------------------
 *
 * Every object is the daemon's, owned by this context's session and named by the
 * handle it returned (kept in the verbs struct's handle field). Posting and
 * polling use the rings the daemon creates with each CQ and QP (rings.c).
 */

struct xmr {
	struct ibv_mr mr;
	struct seg *segs[XROCE_MR_PIECES]; /* the pieces' segments, in address order */
	int nsegs;
	uint64_t npages; /* charged to RLIMIT_MEMLOCK (memlock.c) */
};

struct xctx *ctx_of(struct ibv_context *c)
{
	return to_xctx(c);
}

XROCE_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct xctx *xc = ctx_of(context);
	struct xroce_handle r;
	struct ibv_pd *pd;
	int ret;

	if (!xc) {
		errno = EINVAL;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ctx_call(xc, XROCE_OP_ALLOC_PD, NULL, 0, &r, sizeof(r));
	if (ret) {
		free(pd);
		errno = ret;
		return NULL;
	}
	pd->context = context;
	pd->handle = r.handle;
	return pd;
}

XROCE_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct xroce_handle req;
	struct xctx *xc;
	int ret;

	if (!pd || !(xc = ctx_of(pd->context)))
		return EINVAL;
	req.handle = pd->handle;
	ret = ctx_call(xc, XROCE_OP_DEALLOC_PD, &req, sizeof(req), NULL, 0);
	if (destroy_failed(xc, ret))
		return ret;
	free(pd);
	return 0;
}

static struct ibv_mr *reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	struct xroce_reg_mr_req req = {};
	struct xroce_reg_mr_reply r;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), s, e;
	int fds[XROCE_MR_PIECES];
	struct xctx *xc;
	struct xmr *m;
	int i, ret = 0, writable;

	/* ib_uverbs_reg_mr and ib_umem_get: an empty or wrapping range, or an iova whose
	 * offset in its page is not the address's, is EINVAL; an address with no page
	 * (NULL) is EFAULT, from the page check below */
	if (!pd || !(xc = ctx_of(pd->context)) || !length || (uintptr_t)addr + length < (uintptr_t)addr ||
	    (iova & (page - 1)) != ((uintptr_t)addr & (page - 1))) {
		errno = EINVAL;
		return NULL;
	}
	if (access & IBV_ACCESS_ON_DEMAND) {
		static int said;
		unsupported(&said, "on-demand paging regions (ibv_reg_mr with IBV_ACCESS_ON_DEMAND)");
		return NULL;
	}
	s = (uintptr_t)addr & ~(page - 1);
	e = ((uintptr_t)addr + length + page - 1) & ~(page - 1);
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	m->npages = (e - s) / page;
	if ((ret = memlock_charge(m->npages))) {
		free(m);
		errno = ret;
		return NULL;
	}
	/* ib_access_writable: the device may write the pages (ib_umem_get's FOLL_WRITE) */
	writable = !!(access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND));
	if ((ret = segs_cover(s, e, writable, m->segs, &m->nsegs, req.pieces))) {
		memlock_uncharge(m->npages);
		free(m);
		errno = ret;
		return NULL;
	}
	req.pd = pd->handle;
	req.access = access;
	req.addr = (uintptr_t)addr;
	req.length = length;
	req.iova = iova;
	req.map_addr = s;
	req.map_len = e - s;
	req.npieces = (uint32_t)m->nsegs;
	for (i = 0; i < m->nsegs; i++)
		fds[i] = seg_fd(m->segs[i]);
	ret = ctx_call_fds(xc, XROCE_OP_REG_MR, &req, sizeof(req), fds, m->nsegs, &r, sizeof(r), NULL, 0);
	if (ret) {
		while (m->nsegs)
			seg_put(m->segs[--m->nsegs]);
		memlock_uncharge(m->npages);
		free(m);
		errno = ret;
		return NULL;
	}
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = length;
	m->mr.handle = r.handle;
	m->mr.lkey = r.lkey;
	m->mr.rkey = r.rkey;
	return &m->mr;
}

XROCE_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return reg_mr(pd, addr, length, (uintptr_t)addr, (unsigned int)access);
}

XROCE_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access)
{
	return reg_mr(pd, addr, length, iova, (unsigned int)access);
}

XROCE_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
					     unsigned int access)
{
	return reg_mr(pd, addr, length, iova, access);
}

XROCE_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct xmr *m = (struct xmr *)mr;
	struct xroce_handle req;
	struct xctx *xc;
	int ret;

	if (!mr || !(xc = ctx_of(mr->context)))
		return EINVAL;
	req.handle = mr->handle;
	ret = ctx_call(xc, XROCE_OP_DEREG_MR, &req, sizeof(req), NULL, 0);
	if (destroy_failed(xc, ret))
		return ret;
	while (m->nsegs)
		seg_put(m->segs[--m->nsegs]);
	memlock_uncharge(m->npages);
	free(m);
	return 0;
}

/* A completion channel is a SOCK_SEQPACKET socketpair: the daemon holds one end
 * and writes an armed CQ's cookie on it; channel->fd is the other (pollable). */
XROCE_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct xctx *xc = ctx_of(context);
	struct xroce_handle r;
	struct xchan *c;
	int sv[2], ret;

	if (!xc) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		ret = errno;
		free(c);
		errno = ret;
		return NULL;
	}
	ret = ctx_call_fds(xc, XROCE_OP_CREATE_CHANNEL, NULL, 0, &sv[1], 1, &r, sizeof(r), NULL, 0);
	close(sv[1]);
	if (ret) {
		close(sv[0]);
		free(c);
		errno = ret;
		return NULL;
	}
	c->ch.context = context;
	c->ch.fd = sv[0];
	c->h = r.handle;
	return &c->ch;
}

XROCE_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct xchan *c = (struct xchan *)channel;
	struct xroce_handle req;
	struct xctx *xc;
	int ret;

	if (!channel || !(xc = ctx_of(channel->context)))
		return EINVAL;
	if (channel->refcnt)
		return EBUSY;
	req.handle = c->h;
	ret = ctx_call(xc, XROCE_OP_DESTROY_CHANNEL, &req, sizeof(req), NULL, 0);
	if (destroy_failed(xc, ret))
		return ret;
	close(channel->fd);
	free(c);
	return 0;
}

/* new_cq creates a CQ in the daemon and maps its ring; ibv_create_cq and
 * x_create_cq_ex call it. */
static struct xcq *new_cq(struct ibv_context *context, int cqe, void *cq_context, struct ibv_comp_channel *channel,
			  int comp_vector)
{
	struct xctx *xc = ctx_of(context);
	struct xroce_create_cq_req req = {};
	struct xroce_create_cq_reply r;
	struct xcq *q;
	int ret, fd;

	if (!xc || cqe < 1 || comp_vector != 0 || (channel && channel->context != context)) {
		errno = EINVAL;
		return NULL;
	}
	q = calloc(1, sizeof(*q));
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	req.cqe = (uint32_t)cqe;
	req.channel = channel ? ((struct xchan *)channel)->h : 0;
	req.cookie = (uintptr_t)q;
	ret = ctx_call_fds(xc, XROCE_OP_CREATE_CQ, &req, sizeof(req), NULL, 0, &r, sizeof(r), &fd, 1);
	if (!ret && (ret = map_ring(fd, r.ring_size, XROCE_CQ_RING_HEADER + (uint64_t)r.entries * sizeof(struct xroce_cqe),
				    r.entries, &q->ring))) {
		struct xroce_handle h = { .handle = r.handle };

		ctx_call(xc, XROCE_OP_DESTROY_CQ, &h, sizeof(h), NULL, 0);
	}
	if (ret) {
		free(q);
		errno = ret;
		return NULL;
	}
	q->ring_size = r.ring_size;
	q->entries = r.entries;
	pthread_spin_init(&q->lock, PTHREAD_PROCESS_PRIVATE);
	q->cq.context = context;
	q->cq.channel = channel;
	q->cq.cq_context = cq_context;
	q->cq.handle = r.handle;
	q->cq.cqe = (int)r.cqe;
	pthread_mutex_init(&q->cq.mutex, NULL);
	pthread_cond_init(&q->cq.cond, NULL);
	pthread_mutex_lock(&xc->objs);
	q->next = xc->cqs;
	xc->cqs = q;
	if (channel)
		channel->refcnt++;
	pthread_mutex_unlock(&xc->objs);
	return q;
}

XROCE_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
					  struct ibv_comp_channel *channel, int comp_vector)
{
	struct xcq *q = new_cq(context, cqe, cq_context, channel, comp_vector);

	return q ? &q->cq : NULL;
}

/* x_create_cq_ex is verbs_context.create_cq_ex (verbs.h's inline
 * ibv_create_cq_ex): the wc_flags rdma_rxe serves (byte_len, imm, qp_num,
 * src_qp, slid, sl, dlid_path_bits), no timestamps (EOPNOTSUPP, as rxe), the
 * IBV_CQ_INIT_ATTR_MASK_FLAGS hint accepted. */
static struct ibv_cq_ex *x_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr)
{
	const uint64_t wc = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
			    IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS;
	struct xcq *q;

	if (!attr || (attr->comp_mask & ~(uint32_t)IBV_CQ_INIT_ATTR_MASK_FLAGS) ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && (attr->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->wc_flags & ~wc) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->cqe > INT32_MAX || !(q = new_cq(context, (int)attr->cqe, attr->cq_context, attr->channel, (int)attr->comp_vector)))
		return NULL;
	cq_ex_ops(&q->cqx);
	return &q->cqx;
}

XROCE_EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
	struct xcq *q = (struct xcq *)cq, **pp;
	struct xroce_handle req;
	struct xctx *xc;
	int ret;

	if (!cq || !(xc = ctx_of(cq->context)))
		return EINVAL;
	req.handle = cq->handle;
	ret = ctx_call(xc, XROCE_OP_DESTROY_CQ, &req, sizeof(req), NULL, 0);
	if (destroy_failed(xc, ret))
		return ret;
	pthread_mutex_lock(&xc->objs);
	for (pp = &xc->cqs; *pp; pp = &(*pp)->next)
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	if (cq->channel)
		cq->channel->refcnt--;
	pthread_mutex_unlock(&xc->objs);
	pthread_mutex_destroy(&cq->mutex);
	pthread_cond_destroy(&cq->cond);
	pthread_spin_destroy(&q->lock);
	munmap(q->ring, q->ring_size);
	free(q);
	return 0;
}

/* ibv_get_cq_event reads one event from the channel: the cookie of a CQ of this
 * context (events of a CQ destroyed meanwhile are skipped). */
XROCE_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	struct xroce_event ev;
	struct xctx *xc;
	struct xcq *q;
	ssize_t n;

	if (!channel || !cq || !cq_context || !(xc = ctx_of(channel->context))) {
		errno = EINVAL;
		return -1;
	}
	for (;;) {
		if ((n = read_channel(xc, channel->fd, &ev, sizeof(ev), "completion")) < 0)
			return -1;
		if (n != sizeof(ev))
			continue;
		pthread_mutex_lock(&xc->objs);
		for (q = xc->cqs; q && (uintptr_t)q != ev.cookie; q = q->next)
			;
		if (q && q->cq.channel == channel) {
			*cq = &q->cq;
			*cq_context = q->cq.cq_context;
			pthread_mutex_unlock(&xc->objs);
			return 0;
		}
		pthread_mutex_unlock(&xc->objs);
	}
}

XROCE_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	if (!cq)
		return;
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

static int x_req_notify_cq(struct ibv_cq *cq, int solicited)
{
	struct xroce_notify_req req = { .cq = cq->handle, .solicited_only = solicited != 0 };
	struct xctx *xc = ctx_of(cq->context);

	if (!xc)
		return EINVAL;
	return ctx_call(xc, XROCE_OP_REQ_NOTIFY_CQ, &req, sizeof(req), NULL, 0);
}

/* new_qp creates an RC, UC or UD QP in the daemon (which refuses other types
 * with EOPNOTSUPP and its reason); ibv_create_qp and x_create_qp_ex call it. */
static struct xqp *new_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct xroce_create_qp_req req = {};
	struct xroce_create_qp_reply r;
	struct xctx *xc;
	struct xqp *q;
	int ret, fds[2];

	if (!pd || !attr || !(xc = ctx_of(pd->context)) || !attr->send_cq || !attr->recv_cq) {
		errno = EINVAL;
		return NULL;
	}
	q = calloc(1, sizeof(*q));
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	req.pd = pd->handle;
	req.send_cq = attr->send_cq->handle;
	req.recv_cq = attr->recv_cq->handle;
	req.qp_type = attr->qp_type;
	req.sq_sig_all = attr->sq_sig_all != 0;
	req.max_send_wr = attr->cap.max_send_wr;
	req.max_recv_wr = attr->cap.max_recv_wr;
	req.max_send_sge = attr->cap.max_send_sge;
	req.max_recv_sge = attr->cap.max_recv_sge;
	req.max_inline = attr->cap.max_inline_data;
	req.cookie = (uintptr_t)q;
	req.srq = attr->srq ? attr->srq->handle : 0;
	ret = ctx_call_fds(xc, XROCE_OP_CREATE_QP, &req, sizeof(req), NULL, 0, &r, sizeof(r), fds, 2);
	if (ret) {
		free(q);
		errno = ret;
		return NULL;
	}
	q->db = fds[1];
	if ((ret = qp_rings(q, &r, fds[0]))) {
		struct xroce_handle h = { .handle = r.handle };

		ctx_call(xc, XROCE_OP_DESTROY_QP, &h, sizeof(h), NULL, 0);
		close(q->db);
		free(q);
		errno = ret;
		return NULL;
	}
	q->cap.max_send_wr = r.max_send_wr;
	q->cap.max_recv_wr = r.max_recv_wr;
	q->cap.max_send_sge = r.max_send_sge;
	q->cap.max_recv_sge = r.max_recv_sge;
	q->cap.max_inline_data = r.max_inline;
	q->sq_sig_all = attr->sq_sig_all;
	attr->cap = q->cap; /* as providers do: the capabilities granted */
	q->qp.context = pd->context;
	q->qp.qp_context = attr->qp_context;
	q->qp.pd = pd;
	q->qp.send_cq = attr->send_cq;
	q->qp.recv_cq = attr->recv_cq;
	q->qp.srq = attr->srq;
	q->qp.handle = r.handle;
	q->qp.qp_num = r.qpn;
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = attr->qp_type;
	pthread_mutex_init(&q->qp.mutex, NULL);
	pthread_cond_init(&q->qp.cond, NULL);
	q->wcur = WR_NONE;
	qp_table_add(xc, q);
	return q;
}

XROCE_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct xqp *q = new_qp(pd, attr);
	return q ? &q->qp : NULL;
}

XROCE_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	struct xroce_qp_attr m = {};
	struct xctx *xc;
	int ret;

	if (!qp || !attr || !(xc = ctx_of(qp->context)))
		return EINVAL;
	m.qp = qp->handle;
	m.mask = (uint32_t)mask;
	if ((mask & IBV_QP_AV) && attr->ah_attr.port_num != 1) {
		/* ib_uverbs' modify_qp: rdma_is_port_valid(dest.port_num) */
		warnx("ibv_modify_qp: ah_attr.port_num %u: the device has port 1 only", attr->ah_attr.port_num);
		return EINVAL;
	}
	m.state = attr->qp_state;
	m.cur_state = attr->cur_qp_state;
	m.path_mtu = attr->path_mtu;
	m.dest_qpn = attr->dest_qp_num;
	m.rq_psn = attr->rq_psn;
	m.sq_psn = attr->sq_psn;
	m.access_flags = attr->qp_access_flags;
	memcpy(m.dgid, attr->ah_attr.grh.dgid.raw, 16);
	m.flow_label = attr->ah_attr.grh.flow_label;
	m.sgid_index = attr->ah_attr.grh.sgid_index;
	m.hop_limit = attr->ah_attr.grh.hop_limit;
	m.traffic_class = attr->ah_attr.grh.traffic_class;
	m.is_global = attr->ah_attr.is_global;
	m.max_rd_atomic = attr->max_rd_atomic;
	m.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	m.min_rnr_timer = attr->min_rnr_timer;
	m.timeout = attr->timeout;
	m.retry_cnt = attr->retry_cnt;
	m.rnr_retry = attr->rnr_retry;
	m.port_num = attr->port_num;
	m.pkey_index = attr->pkey_index;
	m.qkey = attr->qkey;
	ret = ctx_call(xc, XROCE_OP_MODIFY_QP, &m, sizeof(m), NULL, 0);
	if (ret)
		return ret;
	if (mask & IBV_QP_STATE) {
		qp->state = attr->qp_state;
		if (attr->qp_state == IBV_QPS_RESET)
			rings_reset((struct xqp *)qp); /* the daemon dropped what they held */
	}
	return 0;
}

/* qp_attr_from fills attr (zeroed first) from the daemon's struct xroce_qp_attr:
 * port 1, P_Key index 0, the path migrated. */
void qp_attr_from(struct ibv_qp_attr *attr, const struct xroce_qp_attr *m)
{
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = attr->cur_qp_state = (enum ibv_qp_state)m->state;
	attr->path_mtu = (enum ibv_mtu)m->path_mtu;
	attr->path_mig_state = IBV_MIG_MIGRATED;
	attr->qp_access_flags = m->access_flags;
	attr->dest_qp_num = m->dest_qpn;
	attr->rq_psn = m->rq_psn;
	attr->sq_psn = m->sq_psn;
	memcpy(attr->ah_attr.grh.dgid.raw, m->dgid, 16);
	attr->ah_attr.grh.flow_label = m->flow_label;
	attr->ah_attr.grh.sgid_index = m->sgid_index;
	attr->ah_attr.grh.hop_limit = m->hop_limit;
	attr->ah_attr.grh.traffic_class = m->traffic_class;
	attr->ah_attr.is_global = m->is_global;
	attr->ah_attr.port_num = 1;
	attr->max_rd_atomic = m->max_rd_atomic;
	attr->max_dest_rd_atomic = m->max_dest_rd_atomic;
	attr->min_rnr_timer = m->min_rnr_timer;
	attr->timeout = m->timeout;
	attr->retry_cnt = m->retry_cnt;
	attr->rnr_retry = m->rnr_retry;
	attr->qkey = m->qkey;
	attr->port_num = 1;
}

XROCE_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *init)
{
	struct xqp *q = (struct xqp *)qp;
	struct xroce_handle req;
	struct xroce_qp_attr m;
	struct xctx *xc;
	int ret;

	(void)mask; /* everything is returned, as providers do */
	if (!qp || !attr || !init || !(xc = ctx_of(qp->context)))
		return EINVAL;
	req.handle = qp->handle;
	ret = ctx_call(xc, XROCE_OP_QUERY_QP, &req, sizeof(req), &m, sizeof(m));
	if (ret)
		return ret;
	qp_attr_from(attr, &m);
	attr->cap = q->cap;
	qp->state = attr->qp_state;
	memset(init, 0, sizeof(*init));
	init->qp_context = qp->qp_context;
	init->send_cq = qp->send_cq;
	init->recv_cq = qp->recv_cq;
	init->srq = qp->srq; /* as libibverbs' ibv_cmd_query_qp */
	init->cap = q->cap;
	init->qp_type = qp->qp_type;
	init->sq_sig_all = q->sq_sig_all;
	return 0;
}

XROCE_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct xroce_handle req;
	struct xctx *xc;
	int ret;

	if (!qp || !(xc = ctx_of(qp->context)))
		return EINVAL;
	req.handle = qp->handle;
	ret = ctx_call(xc, XROCE_OP_DESTROY_QP, &req, sizeof(req), NULL, 0);
	if (destroy_failed(xc, ret))
		return ret;
	qp_table_del(xc, (struct xqp *)qp);
	qp_rings_free((struct xqp *)qp);
	pthread_mutex_destroy(&qp->mutex);
	pthread_cond_destroy(&qp->cond);
	free(((struct xqp *)qp)->wbuf);
	free(qp);
	return 0;
}

/* put_sges appends n scatter/gather entries to a ring slot or WR record at len
 * and returns the new length; the caller has checked that they fit. */
size_t put_sges(unsigned char *buf, size_t len, const struct ibv_sge *sg, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		struct xroce_sge e = { .addr = sg[i].addr, .length = sg[i].length, .lkey = sg[i].lkey };

		memcpy(buf + len, &e, sizeof(e));
		len += sizeof(e);
	}
	return len;
}

/* inline_op: the opcodes IBV_SEND_INLINE applies to. */
int inline_op(enum ibv_wr_opcode op)
{
	return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

/* ---- extended QPs: ibv_create_qp_ex, ibv_qp_to_qp_ex, ibv_wr_* ----------------- */

/*
 * The ibv_wr_* builder of struct ibv_qp_ex (verbs.h; rdma-core's man ibv_wr_post):
 * wr_start opens a batch; per WR the application sets wr_id and wr_flags, calls
 * one opcode function (wr_rdma_write, wr_send, …), then one data function
 * (wr_set_sge, wr_set_sge_list, wr_set_inline_data(_list)); wr_complete posts the
 * batch and returns 0 or the first error, wr_abort drops it. The batch is kept as
 * the records a POST_SEND message carries and sent as x_post_send sends a WR list
 * (several messages when it is longer than one). An error while building (an
 * opcode the QP was not created for, too many SGEs, too much inline data, an
 * unreadable inline buffer) discards the whole batch at wr_complete.
 */

#define WR_SEND_OPS (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND | \
		     IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
		     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

static struct xqp *wq(struct ibv_qp_ex *qx)
{
	return (struct xqp *)qx; /* qpx is the first member */
}

static void wr_fail(struct xqp *q, int e)
{
	if (!q->werr)
		q->werr = e;
}

static void wr_reset(struct xqp *q)
{
	q->wlen = 0;
	q->wn = 0;
	q->wcur = WR_NONE;
	q->wdata = 0;
	q->werr = 0;
}

/* wr_reserve makes room for n more bytes of the batch; 0, or -1 (the batch fails). */
static int wr_reserve(struct xqp *q, size_t n)
{
	unsigned char *b;
	size_t cap;

	if (q->wlen + n <= q->wcap)
		return 0;
	for (cap = q->wcap ? q->wcap : 4096; cap < q->wlen + n; cap *= 2)
		;
	b = realloc(q->wbuf, cap);
	if (!b) {
		wr_fail(q, ENOMEM);
		return -1;
	}
	q->wbuf = b;
	q->wcap = cap;
	return 0;
}

static void wr_close(struct xqp *q)
{
	if (q->wcur != WR_NONE)
		memcpy(q->wbuf + q->wcur, &q->wm, sizeof(q->wm));
	q->wcur = WR_NONE;
	q->wdata = 0;
}

/* wr_open begins a WR of opcode op, which the QP must have been created for. */
static void wr_open(struct xqp *q, enum ibv_wr_opcode op, uint64_t need)
{
	wr_close(q);
	if (!(q->send_ops & need)) {
		wr_fail(q, EINVAL);
		return;
	}
	if (wr_reserve(q, sizeof(q->wm)))
		return;
	memset(&q->wm, 0, sizeof(q->wm));
	q->wm.wr_id = q->qpx.wr_id;
	q->wm.flags = q->qpx.wr_flags;
	q->wm.opcode = op;
	q->wcur = q->wlen;
	q->wlen += sizeof(q->wm);
	q->wn++;
}

static void x_wr_start(struct ibv_qp_ex *qx)
{
	wr_reset(wq(qx));
}

static void x_wr_abort(struct ibv_qp_ex *qx)
{
	wr_reset(wq(qx));
}

static void x_wr_rdma_write(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t remote_addr)
{
	struct xqp *q = wq(qx);

	wr_open(q, IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE);
	q->wm.rkey = rkey;
	q->wm.remote_addr = remote_addr;
}

static void x_wr_rdma_write_imm(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t remote_addr, __be32 imm)
{
	struct xqp *q = wq(qx);

	wr_open(q, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM);
	q->wm.rkey = rkey;
	q->wm.remote_addr = remote_addr;
	q->wm.imm_data = be32toh(imm);
}

static void x_wr_rdma_read(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t remote_addr)
{
	struct xqp *q = wq(qx);

	wr_open(q, IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ);
	q->wm.rkey = rkey;
	q->wm.remote_addr = remote_addr;
}

static void x_wr_send(struct ibv_qp_ex *qx)
{
	wr_open(wq(qx), IBV_WR_SEND, IBV_QP_EX_WITH_SEND);
}

static void x_wr_send_imm(struct ibv_qp_ex *qx, __be32 imm)
{
	struct xqp *q = wq(qx);

	wr_open(q, IBV_WR_SEND_WITH_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM);
	q->wm.imm_data = be32toh(imm);
}

static void x_wr_atomic_cmp_swp(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t remote_addr, uint64_t compare, uint64_t swap)
{
	struct xqp *q = wq(qx);

	wr_open(q, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP);
	q->wm.rkey = rkey;
	q->wm.remote_addr = remote_addr;
	q->wm.compare_add = compare;
	q->wm.swap = swap;
}

static void x_wr_atomic_fetch_add(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t remote_addr, uint64_t add)
{
	struct xqp *q = wq(qx);

	wr_open(q, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD);
	q->wm.rkey = rkey;
	q->wm.remote_addr = remote_addr;
	q->wm.compare_add = add;
}

/* wr_data_ok: a data setter needs an open WR that has no data yet. */
static int wr_data_ok(struct xqp *q)
{
	if (q->wcur == WR_NONE || q->wdata) {
		wr_fail(q, EINVAL);
		return 0;
	}
	q->wdata = 1;
	return 1;
}

static void x_wr_set_sge_list(struct ibv_qp_ex *qx, size_t n, const struct ibv_sge *sg)
{
	struct xqp *q = wq(qx);

	if (!wr_data_ok(q))
		return;
	if (n > q->cap.max_send_sge || n > 32 || (n && !sg)) {
		wr_fail(q, EINVAL);
		return;
	}
	if (wr_reserve(q, n * sizeof(struct xroce_sge)))
		return;
	q->wlen = put_sges(q->wbuf, q->wlen, sg, (int)n);
	q->wm.num_sge = (uint32_t)n;
	q->wm.flags &= ~(uint32_t)IBV_SEND_INLINE; /* the setter, not wr_flags, says inline */
}

static void x_wr_set_sge(struct ibv_qp_ex *qx, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_sge sg = { .addr = addr, .length = length, .lkey = lkey };

	x_wr_set_sge_list(qx, 1, &sg);
}

static void x_wr_set_inline_data_list(struct ibv_qp_ex *qx, size_t n, const struct ibv_data_buf *bufs)
{
	struct xqp *q = wq(qx);
	size_t i, total = 0;

	if (!wr_data_ok(q))
		return;
	if (n && !bufs) {
		wr_fail(q, EINVAL);
		return;
	}
	for (i = 0; i < n; i++)
		total += bufs[i].length;
	if (!inline_op((enum ibv_wr_opcode)q->wm.opcode) || total > q->cap.max_inline_data) {
		wr_fail(q, EINVAL);
		return;
	}
	if (wr_reserve(q, total))
		return;
	for (i = 0; i < n; i++) {
		/* A plain copy, as mlx5's provider makes: the buffer is the caller's. */
		memcpy(q->wbuf + q->wlen, bufs[i].addr, bufs[i].length);
		q->wlen += bufs[i].length;
	}
	q->wm.inline_len = (uint32_t)total;
	q->wm.flags |= IBV_SEND_INLINE;
}

static void x_wr_set_inline_data(struct ibv_qp_ex *qx, void *addr, size_t length)
{
	struct ibv_data_buf b = { .addr = addr, .length = length };

	x_wr_set_inline_data_list(qx, 1, &b);
}

/* x_wr_complete posts the batch: 0, or the errno of the first failure (a build
 * error, a WR the QP refuses or a send ring without room for the whole batch
 * posts nothing). */
static int x_wr_complete(struct ibv_qp_ex *qx)
{
	struct xqp *q = wq(qx);
	int ret;

	wr_close(q);
	if (!ctx_of(q->qp.context))
		wr_fail(q, EINVAL);
	ret = q->werr ? q->werr : sq_post_records(q, q->wbuf, q->wn);
	wr_reset(q);
	return ret;
}

/* What the QP was not created for (verbs.h's other builders): the batch fails. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
static void x_wr_bind_mw(struct ibv_qp_ex *qx, struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	wr_fail(wq(qx), EOPNOTSUPP);
}
static void x_wr_local_inv(struct ibv_qp_ex *qx, uint32_t rkey)
{
	wr_fail(wq(qx), EOPNOTSUPP);
}
static void x_wr_send_inv(struct ibv_qp_ex *qx, uint32_t rkey)
{
	wr_fail(wq(qx), EOPNOTSUPP);
}
static void x_wr_send_tso(struct ibv_qp_ex *qx, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	wr_fail(wq(qx), EOPNOTSUPP);
}
/* x_wr_set_ud_addr: the open WR's wr.ud (UD QPs; an address handle of the QP's PD). */
static void x_wr_set_ud_addr(struct ibv_qp_ex *qx, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct xqp *q = wq(qx);

	if (q->wcur == WR_NONE || q->qp.qp_type != IBV_QPT_UD || !ud_ah_ok(q, ah)) {
		wr_fail(q, EINVAL);
		return;
	}
	q->wm.ah = ah->handle;
	q->wm.remote_qpn = qpn;
	q->wm.remote_qkey = qkey;
}
static void x_wr_set_xrc_srqn(struct ibv_qp_ex *qx, uint32_t srqn)
{
	wr_fail(wq(qx), EOPNOTSUPP);
}
static void x_wr_atomic_write(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t remote_addr, const void *data)
{
	wr_fail(wq(qx), EOPNOTSUPP);
}
#pragma GCC diagnostic pop

/* x_create_qp_ex is verbs_context.create_qp_ex, which verbs.h's inline
 * ibv_create_qp_ex calls for any comp_mask but IBV_QP_INIT_ATTR_PD alone. */
static struct ibv_qp *x_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr)
{
	const uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
			       IBV_QP_INIT_ATTR_MAX_TSO_HEADER | IBV_QP_INIT_ATTR_IND_TABLE |
			       IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	struct xqp *q;

	if (!attr || !ctx_of(context) || !(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd ||
	    attr->pd->context != context || (attr->comp_mask & ~known)) {
		errno = EINVAL;
		return NULL;
	}
	if ((attr->comp_mask & (IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_MAX_TSO_HEADER |
				IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH)) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (attr->send_ops_flags & ~(uint64_t)WR_SEND_OPS))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* struct ibv_qp_init_attr_ex begins with struct ibv_qp_init_attr's fields. */
	q = new_qp(attr->pd, (struct ibv_qp_init_attr *)attr);
	if (!q)
		return NULL;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		struct ibv_qp_ex *x = &q->qpx;

		q->ex = 1;
		q->send_ops = attr->send_ops_flags;
		x->wr_atomic_cmp_swp = x_wr_atomic_cmp_swp;
		x->wr_atomic_fetch_add = x_wr_atomic_fetch_add;
		x->wr_bind_mw = x_wr_bind_mw;
		x->wr_local_inv = x_wr_local_inv;
		x->wr_rdma_read = x_wr_rdma_read;
		x->wr_rdma_write = x_wr_rdma_write;
		x->wr_rdma_write_imm = x_wr_rdma_write_imm;
		x->wr_send = x_wr_send;
		x->wr_send_imm = x_wr_send_imm;
		x->wr_send_inv = x_wr_send_inv;
		x->wr_send_tso = x_wr_send_tso;
		x->wr_set_ud_addr = x_wr_set_ud_addr;
		x->wr_set_xrc_srqn = x_wr_set_xrc_srqn;
		x->wr_set_inline_data = x_wr_set_inline_data;
		x->wr_set_inline_data_list = x_wr_set_inline_data_list;
		x->wr_set_sge = x_wr_set_sge;
		x->wr_set_sge_list = x_wr_set_sge_list;
		x->wr_start = x_wr_start;
		x->wr_complete = x_wr_complete;
		x->wr_abort = x_wr_abort;
		x->wr_atomic_write = x_wr_atomic_write;
	}
	return &q->qp;
}

/* ibv_qp_to_qp_ex: the ibv_qp_ex of a QP created with send_ops_flags, else NULL
 * (libibverbs returns NULL for a QP that is not extended). */
XROCE_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct xqp *q = (struct xqp *)qp;

	if (!qp || !ctx_of(qp->context) || !q->ex) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return &q->qpx;
}

/* ---- address handles, for UD QPs ---- */

/* ibv_create_ah: the daemon resolves the path (GID entry and next hop) once, as
 * ibv_create_ah does on an HCA; RoCE needs the GRH (is_global), port 1. */
XROCE_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct xroce_create_ah_req req = {};
	struct xroce_handle r;
	struct ibv_ah *ah;
	struct xctx *xc;
	int ret;

	if (!pd || !attr || !(xc = ctx_of(pd->context))) {
		errno = EINVAL;
		return NULL;
	}
	req.pd = pd->handle;
	req.flow_label = attr->grh.flow_label;
	memcpy(req.dgid, attr->grh.dgid.raw, 16);
	req.sgid_index = attr->grh.sgid_index;
	req.hop_limit = attr->grh.hop_limit;
	req.traffic_class = attr->grh.traffic_class;
	req.is_global = attr->is_global;
	req.port_num = attr->port_num;
	req.sl = attr->sl;
	if (!(ah = calloc(1, sizeof(*ah)))) {
		errno = ENOMEM;
		return NULL;
	}
	if ((ret = ctx_call(xc, XROCE_OP_CREATE_AH, &req, sizeof(req), &r, sizeof(r)))) {
		free(ah);
		errno = ret;
		return NULL;
	}
	ah->context = pd->context;
	ah->pd = pd;
	ah->handle = r.handle;
	return ah;
}

XROCE_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	struct xroce_handle req;
	struct xctx *xc;
	int ret;

	if (!ah || !(xc = ctx_of(ah->context)))
		return EINVAL;
	req.handle = ah->handle;
	ret = ctx_call(xc, XROCE_OP_DESTROY_AH, &req, sizeof(req), NULL, 0);
	if (destroy_failed(xc, ret))
		return ret;
	free(ah);
	return 0;
}

/* ---- not supported: SRQs, AHs from completions, imports, multicast ---------- */

#define FAIL_PTR_SAY(ret, name, what, ...)               \
	XROCE_EXPORT ret name(__VA_ARGS__)              \
	{                                               \
		static int said;                        \
		unsupported(&said, what);               \
		return NULL;                            \
	}
#define FAIL_INT(name, ...)                             \
	XROCE_EXPORT int name(__VA_ARGS__)              \
	{                                               \
		return EOPNOTSUPP;                      \
	}
#define FAIL_INT_SAY(name, what, ...)                   \
	XROCE_EXPORT int name(__VA_ARGS__)              \
	{                                               \
		static int said;                        \
		unsupported(&said, what);               \
		return EOPNOTSUPP;                      \
	}
#define FAIL_NEG(name, ...)                             \
	XROCE_EXPORT int name(__VA_ARGS__)              \
	{                                               \
		errno = EOPNOTSUPP;                     \
		return -1;                              \
	}

/* ibv_init_ah_from_wc: the address vector answering a UD receive, as rdma-core's
 * (libibverbs/verbs.c) does on RoCE: the GRH area holds the packet's network
 * header, an IPv6 header or, after 20 zero bytes, an IPv4 one; its source is the
 * destination GID, its destination our GID, whose index is the SGID index; hop
 * limit 0xFF, traffic class and flow label from the header. */
XROCE_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc,
				     struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
	const uint8_t *h = (const uint8_t *)grh;
	uint8_t src[16] = { 0 }, dst[16] = { 0 };
	uint32_t vtf = 0;
	int g;

	if (!context || !wc || !grh || !ah_attr || !(wc->wc_flags & IBV_WC_GRH))
		return -1;
	memset(ah_attr, 0, sizeof(*ah_attr));
	if (h[20] >> 4 == 4) { /* IPv4 in the last 20 bytes */
		src[10] = src[11] = dst[10] = dst[11] = 0xff;
		memcpy(src + 12, h + 20 + 12, 4);
		memcpy(dst + 12, h + 20 + 16, 4);
		ah_attr->grh.traffic_class = h[20 + 1];
	} else if (h[0] >> 4 == 6) {
		memcpy(&vtf, h, 4);
		vtf = be32toh(vtf);
		memcpy(src, h + 8, 16);
		memcpy(dst, h + 24, 16);
		ah_attr->grh.traffic_class = (vtf >> 20) & 0xff;
		ah_attr->grh.flow_label = vtf & 0xfffff;
	} else {
		return -1;
	}
	for (g = 0;; g++) {
		union ibv_gid gid;
		if (ibv_query_gid(context, port_num, g, &gid))
			return -1; /* not addressed to one of our GIDs */
		if (!memcmp(gid.raw, dst, 16))
			break;
	}
	memcpy(ah_attr->grh.dgid.raw, src, 16);
	ah_attr->grh.sgid_index = g;
	ah_attr->grh.hop_limit = 0xff;
	ah_attr->is_global = 1;
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	return 0;
}

XROCE_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh,
						  uint8_t port_num)
{
	struct ibv_ah_attr a;

	if (!pd || ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a)) {
		errno = EINVAL;
		return NULL;
	}
	return ibv_create_ah(pd, &a);
}

/* ibv_rereg_mr as rdma-core's (libibverbs/verbs.c) over a provider without one,
 * rdma_rxe's: bad arguments are IBV_REREG_MR_ERR_INPUT with EINVAL; the rest reach
 * the provider, whose answer (dummy_ops.c: EOPNOTSUPP) libibverbs reports as
 * IBV_REREG_MR_ERR_CMD. A negative value either way: applications test < 0. */
XROCE_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length, int access)
{
	static int said;

	(void)pd;
	if (!mr || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!length || !addr)) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	unsupported(&said, "re-registration (ibv_rereg_mr; rdma_rxe has none either: deregister and register again)");
	errno = EOPNOTSUPP;
	return IBV_REREG_MR_ERR_CMD;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
FAIL_PTR_SAY(struct ibv_mr *, ibv_reg_dmabuf_mr, "dma-buf regions (ibv_reg_dmabuf_mr)", struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access)
FAIL_INT_SAY(ibv_resize_cq, "resizing a CQ (ibv_resize_cq): create it with the depth it needs", struct ibv_cq *cq, int cqe)
FAIL_INT(ibv_query_qp_data_in_order, struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
FAIL_INT(ibv_query_ece, struct ibv_qp *qp, struct ibv_ece *ece)
FAIL_INT(ibv_set_ece, struct ibv_qp *qp, struct ibv_ece *ece)
FAIL_INT_SAY(ibv_attach_mcast, "multicast (ibv_attach_mcast)", struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
FAIL_INT_SAY(ibv_detach_mcast, "multicast (ibv_detach_mcast)", struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
FAIL_NEG(ibv_resolve_eth_l2_from_gid, struct ibv_context *context, struct ibv_ah_attr *attr, uint8_t eth_mac[6], uint16_t *vid)
FAIL_PTR_SAY(struct ibv_context *, ibv_import_device, "importing objects of another process (ibv_import_device)", int cmd_fd)
FAIL_PTR_SAY(struct ibv_pd *, ibv_import_pd, "importing objects of another process (ibv_import_pd)", struct ibv_context *context, uint32_t pd_handle)
FAIL_PTR_SAY(struct ibv_mr *, ibv_import_mr, "importing objects of another process (ibv_import_mr)", struct ibv_pd *pd, uint32_t mr_handle)
FAIL_PTR_SAY(struct ibv_dm *, ibv_import_dm, "importing objects of another process (ibv_import_dm)", struct ibv_context *context, uint32_t dm_handle)
#pragma GCC diagnostic pop

/* Teardown of objects that cannot exist does nothing. */
XROCE_EXPORT void ibv_unimport_pd(struct ibv_pd *pd) { (void)pd; }
XROCE_EXPORT void ibv_unimport_mr(struct ibv_mr *mr) { (void)mr; }
XROCE_EXPORT void ibv_unimport_dm(struct ibv_dm *dm) { (void)dm; }
