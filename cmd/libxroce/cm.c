/*
 * librdmacm's connection manager functions on xroce devices (docs/verbs-library.md
 * §7): the structures and semantics of rdma-core's <rdma/rdma_cma.h>, with the
 * connection manager itself in the daemon (transport/rdmacm: REQ/REP/RTU, DREQ/DREP
 * on the device's QP1). An rdma_cm_id lives in the session of the device it is
 * bound to (rdma_bind_addr, rdma_resolve_addr); its id->verbs is that device's
 * context, opened once per process as librdmacm opens every device once.
 *
 * An event channel is a SOCK_SEQPACKET socketpair: the application polls and reads
 * our end; the other end is given to each daemon whose ids use the channel (a
 * completion channel there) and the daemon writes struct xroce_cm_event on it.
 */
#include "libxroce.h"

#include <netdb.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#define XCM_MAGIC 0x78636d69u /* "xcmi" */
#define XCM_MAX_DEVS 8

struct xcm_chan {
	struct rdma_event_channel ch; /* first: the application's pointer */
	int peer;                     /* the end the daemons write on */
	int destroyed;                /* rdma_destroy_event_channel ran: the struct stays */
	int n;
	struct {
		struct xctx *xc;
		uint32_t h; /* the completion channel's handle in that session */
	} reg[XCM_MAX_DEVS];
};

struct xcm_id {
	struct rdma_cm_id id; /* first: the application's pointer */
	uint32_t magic;
	struct xctx *xc; /* the session the id is bound to; NULL before */
	uint32_t h;      /* the daemon's handle */
	uint8_t tos;
	int sync;      /* created without a channel: id.channel is its own, each call waits for its event */
	int listening; /* rdma_listen succeeded */
	/* A wildcard listener listens on every device, as rdma_cm's (cma_listen_on_all):
	 * on the others through shadow ids, which belong to their devices' sessions and
	 * whose requests are the listener's (fill_event). */
	struct xcm_id *owner;  /* a shadow's listener; NULL for an application's id */
	struct xcm_id *shadow; /* a listener's first shadow, then each shadow's next */
	struct ibv_qp_init_attr *qp_init_attr; /* rdma_create_ep's, for rdma_get_request (passive ids) */
	struct xcm_id *next;
};

struct xcm_event {
	struct rdma_cm_event ev; /* first */
	uint8_t private_data[196];
};

static pthread_mutex_t cm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct xcm_id *cm_ids;                     /* every live id, for event lookups */
static struct ibv_context *cm_ctxs[XCM_MAX_DEVS]; /* each device, opened once */
static struct ibv_pd *cm_pds[XCM_MAX_DEVS];       /* each device's PD for ids, made on first bind */
static int cm_nctx = -1;

/* cm_open_all opens every device once (librdmacm's ucma_init); cm_lock held. */
static int cm_open_all(void)
{
	struct ibv_device **list;
	int i, n;

	if (cm_nctx >= 0)
		return cm_nctx;
	list = ibv_get_device_list(&n);
	cm_nctx = 0;
	for (i = 0; list && i < n && cm_nctx < XCM_MAX_DEVS; i++) {
		struct ibv_context *c = ibv_open_device(list[i]);
		if (c)
			cm_ctxs[cm_nctx++] = c;
	}
	if (list)
		ibv_free_device_list(list);
	return cm_nctx;
}

/* ip_of returns the address of a sockaddr as an IPv4-mapped or IPv6 GID's bytes;
 * 0 when the family is neither, *any set for the unspecified address. */
static int ip_of(const struct sockaddr *sa, uint8_t gid[16], int *any)
{
	static const uint8_t zero[16];

	memset(gid, 0, 16);
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, &in->sin_addr, 4);
		*any = in->sin_addr.s_addr == htonl(INADDR_ANY);
		return 1;
	}
	if (sa->sa_family == AF_INET6) {
		memcpy(gid, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
		*any = !memcmp(gid, zero, 16);
		return 1;
	}
	return 0;
}

/* gid_match says whether device c has a GID for sa: its very address (own), or
 * else any address of sa's family that is not link-local (a wildcard's or a
 * destination's device). */
static int gid_match(struct ibv_context *c, const struct sockaddr *sa, int own)
{
	uint8_t want[16];
	int any, g;

	if (!ip_of(sa, want, &any))
		return 0;
	for (g = 0; g < 16; g++) {
		union ibv_gid gid;
		int v4;

		if (ibv_query_gid(c, 1, g, &gid))
			break;
		v4 = gid.raw[10] == 0xff && gid.raw[11] == 0xff && !memcmp(gid.raw, "\0\0\0\0\0\0\0\0\0\0", 10);
		if (own && !any ? !memcmp(gid.raw, want, 16) : v4 == (sa->sa_family == AF_INET) && gid.raw[0] != 0xfe)
			return 1;
	}
	return 0;
}

/* cm_ctx_for returns the device that owns address sa (want_own), or the first
 * device with an address of sa's family (a destination, or a wildcard); NULL when
 * none. */
static struct ibv_context *cm_ctx_for(const struct sockaddr *sa, int want_own)
{
	int i;

	pthread_mutex_lock(&cm_lock);
	cm_open_all();
	pthread_mutex_unlock(&cm_lock);
	for (i = 0; i < cm_nctx; i++)
		if (gid_match(cm_ctxs[i], sa, want_own))
			return cm_ctxs[i];
	return NULL;
}

/* wildcard says whether sa is the unspecified address of its family. */
static int wildcard(const struct sockaddr *sa)
{
	uint8_t g[16];
	int any = 0;

	return ip_of(sa, g, &any) && any;
}

static socklen_t sa_len(const struct sockaddr *sa);

/* cm_ctx_towards returns the device a destination's route leaves through, as
 * rdma_cm picks it (rdma_resolve_ip's route lookup, then the source address's
 * netdev): the kernel's choice of source address for a UDP socket connected to
 * dst, when a device owns it; otherwise the first device with an address of dst's
 * family, whose daemon then names what is wrong with the route. */
static struct ibv_context *cm_ctx_towards(const struct sockaddr *dst)
{
	struct sockaddr_storage src;
	socklen_t len = sizeof(src);
	struct ibv_context *c = NULL;
	int fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd >= 0) {
		struct sockaddr_storage to;

		/* a UDP connect sends nothing, it only looks the route up; the port
		 * (RoCEv2's, where the destination gives none) is never used */
		memcpy(&to, dst, sa_len(dst));
		if (to.ss_family == AF_INET && !((struct sockaddr_in *)&to)->sin_port)
			((struct sockaddr_in *)&to)->sin_port = htons(4791);
		if (to.ss_family == AF_INET6 && !((struct sockaddr_in6 *)&to)->sin6_port)
			((struct sockaddr_in6 *)&to)->sin6_port = htons(4791);
		if (!connect(fd, (struct sockaddr *)&to, sa_len(dst)) && !getsockname(fd, (struct sockaddr *)&src, &len))
			c = cm_ctx_for((struct sockaddr *)&src, 1);
		close(fd);
	}
	return c ? c : cm_ctx_for(dst, 0);
}

/* cm_pd returns device c's PD for rdma_cm_ids, allocating it on first use:
 * librdmacm gives every id bound to a device the device's one PD (id->pd, which
 * rdma_reg_msgs and rdma_create_qp without a PD use; ucma_get_device). */
static struct ibv_pd *cm_pd(struct ibv_context *c)
{
	struct ibv_pd *pd = NULL;
	int i;

	pthread_mutex_lock(&cm_lock);
	for (i = 0; i < cm_nctx; i++)
		if (cm_ctxs[i] == c) {
			if (!cm_pds[i])
				cm_pds[i] = ibv_alloc_pd(c);
			pd = cm_pds[i];
			break;
		}
	pthread_mutex_unlock(&cm_lock);
	if (!pd && i == cm_nctx)
		errno = ENODEV;
	return pd;
}

static struct xcm_id *to_id(struct rdma_cm_id *id)
{
	struct xcm_id *x = (struct xcm_id *)id;
	return x && x->magic == XCM_MAGIC ? x : NULL;
}

static int fail(int e)
{
	errno = e;
	return -1;
}

/* ---- event channels ------------------------------------------------------ */

XROCE_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct xcm_chan *c = calloc(1, sizeof(*c));
	int sv[2];

	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
		free(c);
		return NULL;
	}
	c->ch.fd = sv[0];
	c->peer = sv[1];
	return &c->ch;
}

XROCE_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct xcm_chan *c = (struct xcm_chan *)channel;
	int i;

	if (!c)
		return;
	for (i = 0; i < c->n; i++) {
		struct xroce_handle h = { .handle = c->reg[i].h };
		ctx_call(c->reg[i].xc, XROCE_OP_DESTROY_CHANNEL, &h, sizeof(h), NULL, 0);
	}
	/* The struct is not freed: a thread may still block in rdma_get_cm_event on
	 * it, and must keep blocking as on a destroyed kernel channel (rping's CM
	 * thread does) instead of reading a reused descriptor. */
	__atomic_store_n(&c->destroyed, 1, __ATOMIC_RELEASE);
	close(c->ch.fd);
	close(c->peer);
}

/* free_channel destroys a channel no other thread can be reading (a synchronous
 * id's own) and frees it. */
static void free_channel(struct rdma_event_channel *channel)
{
	rdma_destroy_event_channel(channel);
	free(channel);
}

/* chan_in returns the channel's handle in session xc, giving it the channel's
 * write end on first use; 0 on failure (errno set). */
static uint32_t chan_in(struct xcm_chan *c, struct xctx *xc)
{
	struct xroce_handle r;
	int i, ret;

	for (i = 0; i < c->n; i++)
		if (c->reg[i].xc == xc)
			return c->reg[i].h;
	if (c->n == XCM_MAX_DEVS) {
		errno = ENOSPC;
		return 0;
	}
	ret = ctx_call_fds(xc, XROCE_OP_CREATE_CHANNEL, NULL, 0, &c->peer, 1, &r, sizeof(r), NULL, 0);
	if (ret) {
		errno = ret;
		return 0;
	}
	c->reg[c->n].xc = xc;
	c->reg[c->n++].h = r.handle;
	return r.handle;
}

/* ---- ids ----------------------------------------------------------------- */

static struct xcm_id *new_id(struct rdma_event_channel *channel, void *context, enum rdma_port_space ps)
{
	struct xcm_id *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->magic = XCM_MAGIC;
	x->id.channel = channel;
	x->id.context = context;
	x->id.ps = ps;
	x->id.qp_type = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
	x->id.port_num = 1;
	pthread_mutex_lock(&cm_lock);
	x->next = cm_ids;
	cm_ids = x;
	pthread_mutex_unlock(&cm_lock);
	return x;
}

static void drop_shadows(struct xcm_id *x);
static int bind_others(struct xcm_id *x, struct ibv_context *main, const struct sockaddr *addr);
static int listen_shadows(struct xcm_id *x, int backlog);
static __be16 port_of(const struct sockaddr *sa);

XROCE_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
				enum rdma_port_space ps)
{
	struct rdma_event_channel *own = NULL;
	struct xcm_id *x;

	if (!id)
		return fail(EINVAL);
	if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP) {
		warnx("rdma_create_id: port space 0x%x is not supported by xroce yet (RDMA_PS_TCP and RDMA_PS_UDP are)", ps);
		return fail(EPROTONOSUPPORT);
	}
	/* No channel: a synchronous id (librdmacm's ucma_alloc_id), with a channel of
	 * its own on which each call waits for its event. */
	if (!channel && !(channel = own = rdma_create_event_channel()))
		return -1;
	if (!(x = new_id(channel, context, ps))) {
		if (own)
			free_channel(own);
		return fail(ENOMEM);
	}
	x->sync = own != NULL;
	*id = &x->id;
	return 0;
}

/* complete waits, on a synchronous id, for the event its last call brings and
 * keeps it in id->event (acking the one before), as librdmacm's ucma_complete:
 * -1 with errno ECONNREFUSED for REJECTED, the status's errno for another failed
 * event. An asynchronous id's event goes to its channel: 0 at once. */
static int complete(struct xcm_id *x)
{
	struct rdma_cm_event *e;

	if (!x->sync)
		return 0;
	if (x->id.event) {
		rdma_ack_cm_event(x->id.event);
		x->id.event = NULL;
	}
	if (rdma_get_cm_event(x->id.channel, &x->id.event))
		return -1;
	e = x->id.event;
	if (!e->status)
		return 0;
	return fail(e->event == RDMA_CM_EVENT_REJECTED ? ECONNREFUSED : e->status < 0 ? -e->status : e->status);
}

/* bind_dev binds x to device context c: the daemon makes the id there. */
static int bind_dev(struct xcm_id *x, struct ibv_context *c)
{
	struct xroce_cm_create_id req = { .ps = x->id.ps, .qp_type = x->id.qp_type, .cookie = (uintptr_t)x };
	struct xroce_handle r;
	struct xctx *xc = ctx_of(c);
	int ret;

	if (x->xc)
		return x->xc == xc ? 0 : fail(EINVAL);
	if (!xc)
		return fail(ENODEV);
	if (!(req.channel = chan_in((struct xcm_chan *)x->id.channel, xc)))
		return -1;
	if ((ret = ctx_call(xc, XROCE_OP_CM_CREATE_ID, &req, sizeof(req), &r, sizeof(r))))
		return fail(ret);
	x->xc = xc;
	x->h = r.handle;
	x->id.verbs = c;
	if (!x->id.pd)
		x->id.pd = cm_pd(c);
	return 0;
}

static void to_cm_addr(struct xroce_cm_addr *a, const struct sockaddr *sa)
{
	memset(a, 0, sizeof(*a));
	if (!sa)
		return;
	a->family = sa->sa_family;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		a->port = ntohs(in->sin_port);
		memcpy(a->addr, &in->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		a->port = ntohs(in6->sin6_port);
		a->scope_id = in6->sin6_scope_id;
		memcpy(a->addr, &in6->sin6_addr, 16);
	}
}

static void from_cm_addr(struct sockaddr_storage *ss, const struct xroce_cm_addr *a)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *in = (void *)ss;
		in->sin_family = AF_INET;
		in->sin_port = htons(a->port);
		memcpy(&in->sin_addr, a->addr, 4);
	} else if (a->family == AF_INET6) {
		struct sockaddr_in6 *in6 = (void *)ss;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(a->port);
		in6->sin6_scope_id = a->scope_id;
		memcpy(&in6->sin6_addr, a->addr, 16);
	}
}

/* is_loopback reports whether sa is an IPv4 or IPv6 loopback address
 * (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104). */
static int is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return 0;
}

static socklen_t sa_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

XROCE_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct xcm_id *x = to_id(id);
	struct xroce_cm_bind req = { 0 };
	struct xroce_cm_addr r;
	struct ibv_context *c;
	int ret;

	if (!x || !addr)
		return fail(EINVAL);
	if (!(c = cm_ctx_for(addr, 1))) {
		/* A loopback address is on lo, which no RDMA device serves: rdma_cm
		 * answers ENODEV (cma.c, cma_acquire_dev_by_src_ip) without a word.
		 * libfabric's verbs provider binds 127.0.0.1 to probe, so no message. */
		if (is_loopback(addr))
			return fail(ENODEV);
		warnx("rdma_bind_addr: no xroce device has this address (is `xroce daemon` running on its interface? a daemon takes an address added to it within 0.5 s)");
		return fail(EADDRNOTAVAIL);
	}
	/* A wildcard address's port is taken on the other devices first: rdma_cm's port
	 * space is the namespace's, so one of them refusing it refuses the bind
	 * (cma_check_port), and the id stays unbound. A port the system chooses is
	 * taken on them at rdma_listen. */
	if (wildcard(addr) && port_of(addr) && !x->xc && !x->shadow && bind_others(x, c, addr)) {
		ret = errno;
		drop_shadows(x);
		return fail(ret);
	}
	if (bind_dev(x, c)) {
		drop_shadows(x);
		return -1;
	}
	req.handle = x->h;
	to_cm_addr(&req.addr, addr);
	if ((ret = ctx_call(x->xc, XROCE_OP_CM_BIND, &req, sizeof(req), &r, sizeof(r)))) {
		drop_shadows(x);
		return fail(ret);
	}
	from_cm_addr(&id->route.addr.src_storage, &r);
	return 0;
}

XROCE_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr, struct sockaddr *dst_addr,
				   int timeout_ms)
{
	struct xcm_id *x = to_id(id);
	struct xroce_cm_resolve req = { 0 };
	struct xroce_cm_addr r;
	struct ibv_context *c;
	int ret;

	if (!x || !dst_addr)
		return fail(EINVAL);
	c = x->xc ? id->verbs : src_addr && !wildcard(src_addr) ? cm_ctx_for(src_addr, 1) : cm_ctx_towards(dst_addr);
	if (!c && src_addr) {
		warnx("rdma_resolve_addr: no xroce device has the source address asked for (rping -I, ucmatose -b, "
		      "src_addr): give one of the devices' addresses (`xroce daemon status` lists their interfaces), or "
		      "start `xroce daemon` on the interface that has it");
		return fail(EADDRNOTAVAIL);
	}
	if (!c) {
		warnx("rdma_resolve_addr: no xroce device can reach this address (is `xroce daemon` running, with an "
		      "address of the same IP version?)");
		return fail(EADDRNOTAVAIL);
	}
	if (bind_dev(x, c))
		return -1;
	req.handle = x->h;
	req.timeout_ms = timeout_ms > 0 ? (uint32_t)timeout_ms : 0;
	to_cm_addr(&req.src, src_addr);
	to_cm_addr(&req.dst, dst_addr);
	if ((ret = ctx_call(x->xc, XROCE_OP_CM_RESOLVE_ADDR, &req, sizeof(req), &r, sizeof(r))))
		return fail(ret);
	memcpy(&id->route.addr.dst_storage, dst_addr, sa_len(dst_addr));
	return complete(x);
}

/* simple_op sends an op whose request is the id's handle. */
static int simple_op(struct rdma_cm_id *id, uint16_t op)
{
	struct xcm_id *x = to_id(id);
	struct xroce_handle req;
	int ret;

	if (!x || !x->xc)
		return fail(EINVAL);
	req.handle = x->h;
	if ((ret = ctx_call(x->xc, op, &req, sizeof(req), NULL, 0)))
		return fail(ret);
	return 0;
}

XROCE_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	(void)timeout_ms;
	if (simple_op(id, XROCE_OP_CM_RESOLVE_ROUTE))
		return -1;
	return complete(to_id(id));
}

XROCE_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct xcm_id *x = to_id(id);
	struct xroce_cm_listen req;
	struct xroce_cm_addr r;
	int ret;

	if (!x)
		return fail(EINVAL);
	if (!x->xc) { /* librdmacm binds an unbound id to any address, port 0 */
		struct sockaddr_in any = { .sin_family = AF_INET };
		if (rdma_bind_addr(id, (struct sockaddr *)&any))
			return -1;
	}
	/* The other devices first, on the port the bind chose: when one refuses, the
	 * id stays bound and listens nowhere, as rdma_cm's after a failed listen. */
	if (wildcard(&id->route.addr.src_addr) &&
	    ((!x->shadow && bind_others(x, id->verbs, &id->route.addr.src_addr)) || listen_shadows(x, backlog))) {
		ret = errno;
		drop_shadows(x);
		return fail(ret);
	}
	req.handle = x->h;
	req.backlog = backlog;
	if ((ret = ctx_call(x->xc, XROCE_OP_CM_LISTEN, &req, sizeof(req), &r, sizeof(r)))) {
		drop_shadows(x);
		return fail(ret);
	}
	from_cm_addr(&id->route.addr.src_storage, &r);
	x->listening = 1;
	return 0;
}

/* drop_shadows destroys a listener's shadow ids. */
static void drop_shadows(struct xcm_id *x)
{
	while (x->shadow) {
		struct xcm_id *s = x->shadow;

		x->shadow = s->shadow;
		s->shadow = NULL;
		rdma_destroy_id(&s->id);
	}
}

/* bind_others binds wildcard id x, whose device is main, on every other device with
 * an address of addr's family, to addr's port, through shadow ids that take the
 * requests there for it (rdma_cm's cma_listen_on_all); -1 with errno when one
 * refuses the port (EADDRINUSE, EADDRNOTAVAIL: cma_check_port), the shadows made
 * so far left for drop_shadows. */
static int bind_others(struct xcm_id *x, struct ibv_context *main, const struct sockaddr *addr)
{
	int i, n;

	pthread_mutex_lock(&cm_lock);
	n = cm_open_all();
	pthread_mutex_unlock(&cm_lock);
	for (i = 0; i < n; i++) {
		struct ibv_context *c = cm_ctxs[i];
		struct xroce_cm_bind b = { 0 };
		struct xroce_cm_addr r;
		struct xcm_id *s;
		int ret;

		if (c == main || !gid_match(c, addr, 0) ||
		    (ctx_of(c) && ctx_of(c)->xd->netns == 2)) /* a daemon of another namespace */
			continue;
		if (!(s = new_id(x->id.channel, x->id.context, x->id.ps)))
			return fail(ENOMEM);
		s->owner = x;
		s->shadow = x->shadow;
		x->shadow = s;
		if (bind_dev(s, c))
			return -1;
		b.handle = s->h;
		to_cm_addr(&b.addr, addr);
		if ((ret = ctx_call(s->xc, XROCE_OP_CM_BIND, &b, sizeof(b), &r, sizeof(r))))
			return fail(ret);
	}
	return 0;
}

/* listen_shadows makes a wildcard listener's shadows listen; -1 with errno when one
 * refuses, as rdma_listen fails then. */
static int listen_shadows(struct xcm_id *x, int backlog)
{
	for (struct xcm_id *s = x->shadow; s; s = s->shadow) {
		struct xroce_cm_listen l = { .handle = s->h, .backlog = backlog };
		struct xroce_cm_addr r;
		int ret;

		if (s->listening)
			continue;
		if ((ret = ctx_call(s->xc, XROCE_OP_CM_LISTEN, &l, sizeof(l), &r, sizeof(r))))
			return fail(ret);
		s->listening = 1;
	}
	return 0;
}

/* conn_op is rdma_connect and rdma_accept: the id's QP and conn_param (NULL:
 * librdmacm's defaults, as many READ resources as allowed, retries 7). */
static int conn_op(struct rdma_cm_id *id, struct rdma_conn_param *p, uint16_t op, size_t max_private)
{
	struct xcm_id *x = to_id(id);
	struct xroce_cm_conn req = { 0 };
	int ret;

	if (!x || !x->xc)
		return fail(EINVAL);
	if (!id->qp && (!p || !p->qp_num)) { /* librdmacm's ucma_valid_param refuses no QP and no param */
		warnx("%s without a QP: create one with rdma_create_qp, or give an application-managed QP's number in "
		      "conn_param.qp_num",
		      op == XROCE_OP_CM_CONNECT ? "rdma_connect" : "rdma_accept");
		return fail(EINVAL);
	}
	req.handle = x->h;
	req.qp = id->qp ? id->qp->handle : 0; /* 0: the application's QP, param.qp_num */
	req.tos = x->tos;
	if (!p) {
		req.param.responder_resources = RDMA_MAX_RESP_RES;
		req.param.initiator_depth = RDMA_MAX_INIT_DEPTH;
		req.param.retry_count = req.param.rnr_retry_count = 7;
	} else {
		if (p->private_data_len > max_private || (p->private_data_len && !p->private_data))
			return fail(EINVAL);
		req.param.responder_resources = p->responder_resources;
		req.param.initiator_depth = p->initiator_depth;
		req.param.flow_control = p->flow_control;
		req.param.retry_count = p->retry_count;
		req.param.rnr_retry_count = p->rnr_retry_count;
		req.param.srq = p->srq;
		req.param.qp_num = p->qp_num;
		req.param.private_data_len = p->private_data_len;
		if (p->private_data_len)
			memcpy(req.param.private_data, p->private_data, p->private_data_len);
	}
	if ((ret = ctx_call(x->xc, op, &req, sizeof(req), NULL, 0)))
		return fail(ret);
	return 0;
}

/* Private data limits: REQ 92 − the 36-byte IP CM header, REP 196; SIDR_REQ 216 − 36,
 * SIDR_REP 136. */
XROCE_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	if (conn_op(id, conn_param, XROCE_OP_CM_CONNECT, id && id->ps == RDMA_PS_UDP ? 180 : 56))
		return -1;
	return complete(to_id(id)); /* ESTABLISHED (the RTU sent), or why not */
}

XROCE_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	int ud = id && id->ps == RDMA_PS_UDP;
	struct xcm_id *x = to_id(id);

	if (conn_op(id, conn_param, XROCE_OP_CM_ACCEPT, ud ? 136 : 196))
		return -1;
	if (!ud) {
		if (id->qp)
			id->qp->state = IBV_QPS_RTS; /* brought up before the REP went, as librdmacm's rdma_accept */
		return complete(x);                  /* ESTABLISHED at the RTU */
	}
	if (x->sync && id->event) { /* a SIDR_REP ends it: the request's event is done */
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	return 0;
}

XROCE_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	struct xcm_id *x = to_id(id);
	struct xroce_cm_reject req = { 0 };
	int ret;

	if (!x || !x->xc || private_data_len > sizeof(req.private_data) || (private_data_len && !private_data))
		return fail(EINVAL);
	req.handle = x->h;
	req.private_data_len = private_data_len;
	if (private_data_len)
		memcpy(req.private_data, private_data, private_data_len);
	if ((ret = ctx_call(x->xc, XROCE_OP_CM_REJECT, &req, sizeof(req), NULL, 0)))
		return fail(ret);
	return 0;
}

XROCE_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	if (simple_op(id, XROCE_OP_CM_DISCONNECT))
		return -1;
	if (id->qp) /* the daemon moved it to the error state, as librdmacm's ucma_shutdown */
		id->qp->state = IBV_QPS_ERR;
	return complete(to_id(id)); /* DISCONNECTED: the DREP, or the peer's DREQ before it */
}

XROCE_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct xcm_id *x = to_id(id), **p;

	if (!x)
		return fail(EINVAL);
	drop_shadows(x);
	if (x->xc)
		simple_op(id, XROCE_OP_CM_DESTROY_ID);
	pthread_mutex_lock(&cm_lock);
	for (p = &cm_ids; *p; p = &(*p)->next)
		if (*p == x) {
			*p = x->next;
			break;
		}
	pthread_mutex_unlock(&cm_lock);
	if (x->sync) {
		if (id->event)
			rdma_ack_cm_event(id->event);
		free_channel(id->channel);
	}
	x->magic = 0;
	free(x);
	return 0;
}

/* ---- QPs ----------------------------------------------------------------- */

/* init_qp moves a new QP to INIT, as librdmacm's ucma_init_conn_qp does with the
 * kernel's attributes (P_Key index 0, port 1, no remote access until connected); a
 * UD QP goes on to RTS with rdma_cm's Q_Key, as ucma_init_ud_qp does. */
static int init_qp(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	int ret;

	if (qp->qp_type != IBV_QPT_UD)
		return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	a.qkey = RDMA_UDP_QKEY;
	if ((ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)))
		return ret;
	a.qp_state = IBV_QPS_RTR;
	if ((ret = ibv_modify_qp(qp, &a, IBV_QP_STATE)))
		return ret;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/* destroy_cqs destroys the CQs and completion channels create_cqs made for an id
 * (only those are in id->send_cq, id->recv_cq; librdmacm's ucma_destroy_cqs). */
static void destroy_cqs(struct rdma_cm_id *id)
{
	if (id->send_cq && id->send_cq != id->recv_cq)
		ibv_destroy_cq(id->send_cq);
	if (id->recv_cq)
		ibv_destroy_cq(id->recv_cq);
	if (id->send_cq_channel && id->send_cq_channel != id->recv_cq_channel)
		ibv_destroy_comp_channel(id->send_cq_channel);
	if (id->recv_cq_channel)
		ibv_destroy_comp_channel(id->recv_cq_channel);
	id->send_cq = id->recv_cq = NULL;
	id->send_cq_channel = id->recv_cq_channel = NULL;
}

/* make_cq makes a CQ of n entries with a completion channel of its own (what
 * rdma_get_send_comp and rdma_get_recv_comp of <rdma/rdma_verbs.h> wait on). */
static int make_cq(struct rdma_cm_id *id, uint32_t n, struct ibv_cq **cq, struct ibv_comp_channel **ch)
{
	if (!n)
		return 0;
	if (!(*ch = ibv_create_comp_channel(id->verbs)))
		return -1;
	if (!(*cq = ibv_create_cq(id->verbs, n, id, *ch, 0)))
		return -1;
	return 0;
}

/* create_cqs gives the id a send CQ of send_size and a receive CQ of recv_size
 * entries (0: none), each with its completion channel, for a QP created without
 * CQs (librdmacm's ucma_create_cqs). */
static int create_cqs(struct rdma_cm_id *id, uint32_t send_size, uint32_t recv_size)
{
	if (make_cq(id, recv_size, &id->recv_cq, &id->recv_cq_channel) ||
	    make_cq(id, send_size, &id->send_cq, &id->send_cq_channel)) {
		destroy_cqs(id);
		return -1;
	}
	return 0;
}

/* rdma_create_qp_ex creates the id's QP and moves it to INIT (RTS for UD). No PD:
 * the id's (its device's, or rdma_create_ep's). A CQ left NULL is made for it, with
 * a completion channel, and kept in id->send_cq / id->recv_cq (destroyed with the
 * QP); the application's own CQs are not put there, as in librdmacm's
 * rdma_create_qp_ex. EINVAL: the id has a QP, the PD is another device's, or a CQ
 * differs from the id's. */
XROCE_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct ibv_qp *qp;
	int ret;

	if (!to_id(id) || !id->verbs || !attr || id->qp)
		return fail(EINVAL);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		if (!id->pd && !(id->pd = cm_pd(id->verbs)))
			return -1;
		attr->pd = id->pd;
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
	} else if (attr->pd->context != id->verbs)
		return fail(EINVAL);
	if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
	    (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq))
		return fail(EINVAL);
	if (create_cqs(id, attr->send_cq || id->send_cq ? 0 : attr->cap.max_send_wr,
		       attr->recv_cq || id->recv_cq ? 0 : attr->cap.max_recv_wr))
		return -1;
	if (!attr->send_cq)
		attr->send_cq = id->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = id->recv_cq;
	if (!(qp = ibv_create_qp_ex(id->verbs, attr))) {
		ret = errno;
		destroy_cqs(id);
		return fail(ret);
	}
	if ((ret = init_qp(qp))) {
		ibv_destroy_qp(qp);
		destroy_cqs(id);
		return fail(ret);
	}
	id->pd = qp->pd;
	id->qp = qp;
	return 0;
}

XROCE_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex a;

	if (!qp_init_attr)
		return fail(EINVAL);
	memset(&a, 0, sizeof(a));
	memcpy(&a, qp_init_attr, sizeof(*qp_init_attr));
	a.comp_mask = pd ? IBV_QP_INIT_ATTR_PD : 0;
	a.pd = pd;
	if (rdma_create_qp_ex(id, &a))
		return -1;
	memcpy(qp_init_attr, &a, sizeof(*qp_init_attr)); /* the CQs and caps it got, as librdmacm */
	return 0;
}

XROCE_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp) {
		ibv_destroy_qp(id->qp);
		id->qp = NULL;
	}
	destroy_cqs(id);
}

/* ---- events -------------------------------------------------------------- */

/* find_id returns the live id an event names; cm_lock held. A CONNECT_REQUEST
 * names its listener by cookie; the ids the daemon made for requests have cookie 0
 * and are found by channel and handle. */
static struct xcm_id *find_id(struct rdma_event_channel *ch, uint64_t cookie, uint32_t h)
{
	struct xcm_id *x;

	for (x = cm_ids; x; x = x->next)
		if (cookie ? (uintptr_t)x == cookie : x->id.channel == ch && x->h == h)
			return x;
	return NULL;
}

/* gid_index returns the index of an address's GID on context c (0 when absent). */
static uint8_t gid_index(struct ibv_context *c, const struct sockaddr *sa)
{
	uint8_t want[16];
	int any, g;

	if (!c || !ip_of(sa, want, &any))
		return 0;
	for (g = 0; g < 16; g++) {
		union ibv_gid gid;
		if (ibv_query_gid(c, 1, g, &gid))
			break;
		if (!memcmp(gid.raw, want, 16))
			return g;
	}
	return 0;
}

/* fill_ud fills an RDMA_PS_UDP event's param.ud: the private data, the address
 * vector to the peer (its GID from the peer's address, ours by index, hop limit
 * 64, as rdma_cm's route on RoCE), and for ESTABLISHED the peer's QPN and Q_Key
 * from its SIDR_REP. */
static void fill_ud(struct xcm_event *e, struct xcm_id *x, const struct xroce_cm_event *m)
{
	struct rdma_ud_param *u = &e->ev.param.ud;
	uint8_t dgid[16];
	int any;

	u->private_data = m->param.private_data_len ? e->private_data : NULL;
	u->private_data_len = m->param.private_data_len;
	u->qp_num = m->param.qp_num;
	u->qkey = m->qkey;
	if (ip_of(&x->id.route.addr.dst_addr, dgid, &any)) {
		memcpy(u->ah_attr.grh.dgid.raw, dgid, 16);
		u->ah_attr.grh.sgid_index = gid_index(x->id.verbs, &x->id.route.addr.src_addr);
		u->ah_attr.grh.hop_limit = 64;
		u->ah_attr.is_global = 1;
		u->ah_attr.port_num = 1;
	}
}

/* explain says why on stderr when an event reports a final failure, as the
 * kernel's rdma_cm cannot: the application prints only the event's name and
 * status. REJECTED is left to the application (its status is the REJ's reason, and
 * perftest retries a REJ while its server gets ready). */
static void explain(struct xcm_id *x, const struct xroce_cm_event *m)
{
	unsigned port = ntohs(rdma_get_dst_port(&x->id));

	switch (m->event) {
	case RDMA_CM_EVENT_ADDR_ERROR:
		if (m->status == -EADDRNOTAVAIL)
			warnx("rdma_resolve_addr: xroce's RDMA CM takes no IPv6 link-local address (fe80::/10): use a global "
			      "or unique-local address of the peer, or the verbs path with GID 0 (the README's \"Unmodified "
			      "applications\")");
		else if (m->status == -ENETUNREACH)
			warnx("rdma_resolve_addr: no route to the destination through this device's interface (`ip route "
			      "get ADDR` in the daemon's network namespace; an address of this host is not reachable "
			      "either): check the address, or add a route (the daemon's log has the details)");
		else
			warnx("rdma_resolve_addr: no neighbour answer (ARP or ND) from the destination, or from the gateway "
			      "its route goes through, within the application's timeout: is it up? (the daemon's log has "
			      "the details)");
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		if (m->status == -ETIMEDOUT)
			warnx("no answer from the peer's connection manager through every retry: is an RDMA CM running there "
			      "(rdma_rxe's rdma_cm, or an xroce daemon)?");
		else if (m->status == -EMSGSIZE)
			warnx("rdma_connect: the interface %s's MTU carries no RoCE frame, not even the connection manager's "
			      "256-byte MADs, so the request never left: raise it (ip link set %s mtu 1500)",
			      x->xc->xd->ifname, x->xc->xd->ifname);
		else if (m->status == -EHOSTUNREACH)
			warnx("the peer's host, or a router on the way, answered the connection requests with ICMP errors: no "
			      "RoCE endpoint there, or no route to it (the daemon's log names the sender and the fix)");
		else if (x->id.ps == RDMA_PS_UDP && m->status == 1)
			warnx("SIDR_REP status 1 (Service ID not supported): nothing listens on UDP port %u there", port);
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		warnx("the peer's REP did not fit the QP (the daemon's log says why)");
		break;
	default:
		break;
	}
}

/* fill_event turns a daemon event into the application's; NULL when it names no
 * live id (destroyed since). */
static struct xcm_event *fill_event(struct rdma_event_channel *channel, const struct xroce_cm_event *m)
{
	struct xcm_event *e;
	struct xcm_id *x, *child = NULL;

	pthread_mutex_lock(&cm_lock);
	x = find_id(channel, m->cookie, m->handle);
	pthread_mutex_unlock(&cm_lock);
	if (!x)
		return NULL;
	if (!(e = calloc(1, sizeof(*e))))
		return NULL;
	if (m->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		struct xcm_id *l = x->owner ? x->owner : x; /* a shadow's requests are its listener's */

		if (!(child = new_id(l->id.channel, l->id.context, l->id.ps))) {
			free(e);
			return NULL;
		}
		child->xc = x->xc; /* the request's device: the shadow's */
		child->h = m->handle;
		child->id.verbs = x->id.verbs;
		child->id.pd = cm_pd(x->id.verbs);
		/* A synchronous listener's requests each get a synchronous id with a
		 * channel of its own (librdmacm's ucma_process_conn_req). */
		if (l->sync && rdma_migrate_id(&child->id, NULL)) {
			warnx("rdma_get_request: a connection request's own event channel: %s", strerror(errno));
			rdma_destroy_id(&child->id); /* the daemon rejects the request */
			free(e);
			return NULL;
		}
		e->ev.listen_id = &l->id;
		x = child;
	} else if (x->owner) {
		x = x->owner;
	}
	e->ev.id = &x->id;
	e->ev.event = m->event;
	e->ev.status = m->status;
	if (m->local.family)
		from_cm_addr(&x->id.route.addr.src_storage, &m->local);
	if (m->remote.family)
		from_cm_addr(&x->id.route.addr.dst_storage, &m->remote);
	memcpy(e->private_data, m->param.private_data, sizeof(e->private_data));
	if (x->id.ps == RDMA_PS_UDP) {
		fill_ud(e, x, m);
		return e;
	}
	e->ev.param.conn.private_data = m->param.private_data_len ? e->private_data : NULL;
	e->ev.param.conn.private_data_len = m->param.private_data_len;
	e->ev.param.conn.responder_resources = m->param.responder_resources;
	e->ev.param.conn.initiator_depth = m->param.initiator_depth;
	e->ev.param.conn.flow_control = m->param.flow_control;
	e->ev.param.conn.retry_count = m->param.retry_count;
	e->ev.param.conn.rnr_retry_count = m->param.rnr_retry_count;
	e->ev.param.conn.srq = m->param.srq;
	e->ev.param.conn.qp_num = m->param.qp_num;
	explain(x, m);
	if (m->event == RDMA_CM_EVENT_ESTABLISHED && x->id.qp)
		x->id.qp->state = IBV_QPS_RTS;
	if (m->event == RDMA_CM_EVENT_ROUTE_RESOLVED)
		x->id.route.num_paths = 1;
	return e;
}

/* chan_destroyed says whether rdma_destroy_event_channel ran on channel. */
static int chan_destroyed(struct rdma_event_channel *channel)
{
	return __atomic_load_n(&((struct xcm_chan *)channel)->destroyed, __ATOMIC_ACQUIRE);
}

/* hang blocks for good, as a read of a destroyed kernel event channel does: rping's
 * CM thread reads while its main thread destroys the channel and exits. */
static void hang(void)
{
	for (;;)
		pause();
}

/* wait_event waits until the channel can be read, unless it is non-blocking: -1
 * with EINTR at a signal, or ENODEV (and the daemon's socket named) when a daemon
 * the channel is registered with went away, whose events would never come. */
static int wait_event(struct rdma_event_channel *channel)
{
	struct xcm_chan *c = (struct xcm_chan *)channel;
	struct pollfd p[1 + XCM_MAX_DEVS];
	int i, n = c->n;

	if (fcntl(channel->fd, F_GETFL) & O_NONBLOCK)
		return 0;
	p[0] = (struct pollfd){ .fd = channel->fd, .events = POLLIN };
	for (i = 0; i < n; i++)
		p[1 + i] = (struct pollfd){ .fd = c->reg[i].xc->fd, .events = POLLRDHUP };
	if (poll(p, 1 + n, -1) < 0)
		return -1;
	if (p[0].revents)
		return 0;
	for (i = 0; i < n; i++)
		if (p[1 + i].revents & (POLLHUP | POLLRDHUP | POLLERR)) {
			warnx("rdma_get_cm_event: the daemon at %s went away: restart it with `xroce daemon -d IFACE`",
			      c->reg[i].xc->xd->path);
			return fail(ENODEV);
		}
	return 0;
}

XROCE_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct xroce_cm_event m;
	struct xcm_event *e;
	ssize_t n;

	if (!channel || !event)
		return fail(EINVAL);
	for (;;) {
		if (chan_destroyed(channel))
			hang(); /* a thread reading a channel another destroyed */
		if (wait_event(channel))
			return -1;
		n = read(channel->fd, &m, sizeof(m)); /* EINTR returns, as librdmacm's read */
		if ((n == 0 || (n < 0 && errno == EBADF)) && chan_destroyed(channel))
			hang(); /* destroyed under us: no event ever comes */
		if (n < 0)
			return -1; /* EAGAIN on a non-blocking channel */
		if (n == 0) {
			warnx("rdma_get_cm_event: the daemon closed the event channel: is it alive? (`xroce daemon status`)");
			return fail(ENODEV);
		}
		if (n != sizeof(m)) {
			warnx("rdma_get_cm_event: a %zd-byte event, want %zu: are the library and daemon from one build?", n,
			      sizeof(m));
			return fail(EPROTO);
		}
		if ((e = fill_event(channel, &m))) {
			*event = &e->ev;
			return 0;
		}
	}
}

XROCE_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event)
		return fail(EINVAL);
	free(event);
	return 0;
}

XROCE_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
		"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR", "RDMA_CM_EVENT_ROUTE_RESOLVED",
		"RDMA_CM_EVENT_ROUTE_ERROR", "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
		"RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE", "RDMA_CM_EVENT_REJECTED",
		"RDMA_CM_EVENT_ESTABLISHED", "RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DEVICE_REMOVAL",
		"RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR", "RDMA_CM_EVENT_ADDR_CHANGE",
		"RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};
	return (unsigned)event < sizeof(names) / sizeof(names[0]) ? names[event] : "UNKNOWN EVENT";
}

/* ---- addresses and options ----------------------------------------------- */

static __be16 port_of(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)(const void *)sa)->sin_port;
	if (sa->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)(const void *)sa)->sin6_port;
	return 0;
}

XROCE_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return id ? port_of(&id->route.addr.src_addr) : 0;
}

XROCE_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return id ? port_of(&id->route.addr.dst_addr) : 0;
}

XROCE_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval, size_t optlen)
{
	struct xcm_id *x = to_id(id);

	if (!x || !optval || level != RDMA_OPTION_ID)
		return fail(!x || !optval ? EINVAL : ENOSYS);
	switch (optname) {
	case RDMA_OPTION_ID_TOS:
		if (optlen != sizeof(uint8_t))
			return fail(EINVAL);
		x->tos = *(uint8_t *)optval;
		return 0;
	case RDMA_OPTION_ID_REUSEADDR:
	case RDMA_OPTION_ID_AFONLY:
	case RDMA_OPTION_ID_ACK_TIMEOUT:
		return 0; /* ports free at TimeWait's end; one family per id; the ACK timeout is rdma_cm's */
	}
	return fail(ENOSYS);
}

/* move_events moves x's events that wait unread on channel from to channel to,
 * as the kernel's rdma_migrate_id moves them (ucma_move_events): the waiting
 * messages are read, x's written to to's other end, the rest back to from's, each
 * in their order. */
static void move_events(struct xcm_id *x, struct rdma_event_channel *from, struct rdma_event_channel *to)
{
	struct xroce_cm_event m;
	int back = ((struct xcm_chan *)from)->peer, ahead = ((struct xcm_chan *)to)->peer;
	struct xroce_cm_event *keep = NULL;
	size_t n = 0, i;

	while (recv(from->fd, &m, sizeof(m), MSG_DONTWAIT) == (ssize_t)sizeof(m)) {
		if (m.cookie == (uintptr_t)x || (!m.cookie && m.handle == x->h)) {
			if (write(ahead, &m, sizeof(m)) != (ssize_t)sizeof(m))
				warnx("rdma_migrate_id: an event could not move to the new channel: %s", strerror(errno));
			continue;
		}
		struct xroce_cm_event *k = realloc(keep, (n + 1) * sizeof(*k));
		if (!k)
			break;
		keep = k;
		keep[n++] = m;
	}
	for (i = 0; i < n; i++)
		if (write(back, &keep[i], sizeof(keep[i])) != (ssize_t)sizeof(keep[i]))
			warnx("rdma_migrate_id: an event of another id was lost: %s", strerror(errno));
	free(keep);
}

/* rdma_migrate_id sends the id's events to channel from now on, those waiting
 * unread on its old channel included; NULL makes the id synchronous with a channel
 * of its own (EINVAL if it is already, as librdmacm). A synchronous id's old channel
 * and pending event go. Unlike librdmacm, it does not wait for the application to
 * ack the id's events it already read. */
XROCE_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct xcm_id *x = to_id(id);
	struct rdma_event_channel *ch = channel;
	int ret;

	if (!x || (x->sync && !channel))
		return fail(EINVAL);
	if (!ch && !(ch = rdma_create_event_channel()))
		return -1;
	if (x->xc) { /* the daemon has the id: its events go to ch's handle there */
		struct xroce_cm_migrate req = { .handle = x->h };
		if (!(req.channel = chan_in((struct xcm_chan *)ch, x->xc)))
			ret = errno;
		else
			ret = ctx_call(x->xc, XROCE_OP_CM_MIGRATE_ID, &req, sizeof(req), NULL, 0);
		if (ret) {
			if (!channel)
				free_channel(ch);
			return fail(ret);
		}
	}
	for (struct xcm_id *s = x->shadow; s; s = s->shadow) { /* a wildcard listener's shadows follow it */
		struct xroce_cm_migrate req = { .handle = s->h };

		if ((req.channel = chan_in((struct xcm_chan *)ch, s->xc)))
			ret = ctx_call(s->xc, XROCE_OP_CM_MIGRATE_ID, &req, sizeof(req), NULL, 0);
		else
			ret = errno;
		if (ret) {
			warnx("rdma_migrate_id: the listener on %s stays on the old channel: %s", s->id.verbs->device->name, strerror(ret));
			continue;
		}
		move_events(s, id->channel, ch);
		pthread_mutex_lock(&cm_lock);
		s->id.channel = ch;
		pthread_mutex_unlock(&cm_lock);
	}
	move_events(x, id->channel, ch);
	if (x->sync) {
		if (id->event) {
			rdma_ack_cm_event(id->event);
			id->event = NULL;
		}
		free_channel(id->channel);
	}
	pthread_mutex_lock(&cm_lock); /* find_id matches an id's channel under it */
	x->sync = !channel;
	id->channel = ch;
	pthread_mutex_unlock(&cm_lock);
	return 0;
}

/* rdma_get_request waits on a synchronous listening id for the next connection
 * request and returns its id, which holds the CONNECT_REQUEST event (id->event)
 * and, when the listener came from rdma_create_ep with QP attributes, a QP made
 * with them in the listener's PD (librdmacm's rdma_get_request). EINVAL: the
 * listener is not synchronous, or its next event is not a request;
 * ECONNREFUSED: a REJECTED event. The event stays in listen->event on failure. */
XROCE_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct xcm_id *l = to_id(listen);
	struct rdma_cm_event *e;
	int ret = 0;

	if (!l || !id || !l->sync)
		return fail(EINVAL);
	if (!l->listening) { /* librdmacm would wait for ever for a request that never comes */
		warnx("rdma_get_request on an id that does not listen: call rdma_listen on it first");
		return fail(EINVAL);
	}
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	if (rdma_get_cm_event(listen->channel, &e))
		return -1;
	if (e->event == RDMA_CM_EVENT_REJECTED)
		ret = ECONNREFUSED;
	else if (e->status)
		ret = e->status < 0 ? -e->status : e->status;
	else if (e->event != RDMA_CM_EVENT_CONNECT_REQUEST)
		ret = EINVAL;
	else if (l->qp_init_attr) {
		struct ibv_qp_init_attr attr = *l->qp_init_attr;
		if (rdma_create_qp(e->id, listen->pd, &attr))
			ret = errno;
	}
	if (ret) {
		listen->event = e;
		return fail(ret);
	}
	*id = e->id;
	(*id)->event = e;
	return 0;
}

/* rdma_create_ep makes a synchronous id from rdma_getaddrinfo's res: passive
 * (RAI_PASSIVE) bound to its source address, keeping pd and qp_init_attr for
 * rdma_get_request; active resolved to its destination (2 s for the address and the
 * route) with a QP from qp_init_attr when given (librdmacm's rdma_create_ep). The
 * id is destroyed on failure (errno says why). */
XROCE_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
				struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cm_id;
	struct xcm_id *x;
	int ret;

	if (!id || !res)
		return fail(EINVAL);
	if (res->ai_qp_type != IBV_QPT_RC && res->ai_qp_type != IBV_QPT_UD) {
		warnx("rdma_create_ep: QP type %d is not supported by xroce (RC and UD are; rdma_rxe has no XRC either)",
		      res->ai_qp_type);
		return fail(EOPNOTSUPP);
	}
	if (rdma_create_id(NULL, &cm_id, NULL, res->ai_port_space))
		return -1;
	x = to_id(cm_id);
	if (res->ai_flags & RAI_PASSIVE) {
		if (rdma_bind_addr(cm_id, res->ai_src_addr))
			goto err;
		if (pd)
			cm_id->pd = pd;
		if (qp_init_attr) {
			if (!(x->qp_init_attr = malloc(sizeof(*qp_init_attr)))) {
				errno = ENOMEM;
				goto err;
			}
			*x->qp_init_attr = *qp_init_attr;
			x->qp_init_attr->qp_type = res->ai_qp_type;
		}
		*id = cm_id;
		return 0;
	}
	if (rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000) || rdma_resolve_route(cm_id, 2000))
		goto err;
	if (qp_init_attr) {
		qp_init_attr->qp_type = res->ai_qp_type;
		if (rdma_create_qp(cm_id, pd, qp_init_attr))
			goto err;
	}
	*id = cm_id;
	return 0;
err:
	ret = errno;
	rdma_destroy_ep(cm_id);
	return fail(ret);
}

/* rdma_destroy_ep destroys an id with its QP (and the CQs made for it). */
XROCE_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	struct xcm_id *x = to_id(id);

	if (!x)
		return;
	rdma_destroy_qp(id);
	free(x->qp_init_attr);
	x->qp_init_attr = NULL;
	rdma_destroy_id(id);
}

/* rdma_init_qp_attr gives the attributes and mask that move an application-managed
 * QP to qp_attr->qp_state (INIT, RTR or RTS), from the id's connection (the daemon's
 * rdmacm.Conn.QPAttrs, after Linux's ib_cm_init_qp_attr). EINVAL: another state, an
 * RTR or RTS before the peer's REP on the active side, an RDMA_PS_UDP id. */
XROCE_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	struct xcm_id *x = to_id(id);
	struct xroce_cm_init_qp_attr req;
	struct xroce_qp_attr r;
	int ret;

	if (!x || !x->xc || !qp_attr || !qp_attr_mask)
		return fail(EINVAL);
	req.handle = x->h;
	req.state = qp_attr->qp_state;
	if ((ret = ctx_call(x->xc, XROCE_OP_CM_INIT_QP_ATTR, &req, sizeof(req), &r, sizeof(r))))
		return fail(ret);
	qp_attr_from(qp_attr, &r);
	*qp_attr_mask = (int)r.mask;
	return 0;
}

/* rdma_establish sends the RTU of an application-managed QP's connection after
 * RDMA_CM_EVENT_CONNECT_RESPONSE (the application has moved its QP to RTS); no
 * event follows. EINVAL for an id with a QP of rdma_create_qp (librdmacm's). */
XROCE_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	if (!id || id->qp)
		return fail(EINVAL);
	return simple_op(id, XROCE_OP_CM_ESTABLISH);
}

XROCE_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	(void)id;
	(void)event;
	return 0;
}

XROCE_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list;
	int n;

	pthread_mutex_lock(&cm_lock);
	n = cm_open_all();
	pthread_mutex_unlock(&cm_lock);
	if (!(list = calloc(n + 1, sizeof(*list))))
		return NULL;
	memcpy(list, cm_ctxs, n * sizeof(*list));
	if (num_devices)
		*num_devices = n;
	return list;
}

XROCE_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

/* ---- rdma_getaddrinfo ---------------------------------------------------- */

XROCE_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *n = res->ai_next;
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res);
		res = n;
	}
}

/* copy_addr sets *to to a copy of len bytes of from; 0, or -1 with errno ENOMEM. */
static int copy_addr(struct sockaddr **to, socklen_t *to_len, const struct sockaddr *from, socklen_t len)
{
	if (!(*to = malloc(len)))
		return fail(ENOMEM);
	memcpy(*to, from, len);
	*to_len = len;
	return 0;
}

/* getaddrinfo_hints is rdma_getaddrinfo without a node or a service: the hints'
 * addresses and flags alone (librdmacm's rdma_getaddrinfo). */
static int getaddrinfo_hints(const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct rdma_addrinfo *r = calloc(1, sizeof(*r));

	if (!r)
		return fail(ENOMEM);
	r->ai_flags = hints->ai_flags;
	r->ai_family = hints->ai_family;
	r->ai_qp_type = hints->ai_qp_type;
	r->ai_port_space = hints->ai_port_space;
	if ((hints->ai_dst_len && copy_addr(&r->ai_dst_addr, &r->ai_dst_len, hints->ai_dst_addr, hints->ai_dst_len)) ||
	    (hints->ai_src_len && copy_addr(&r->ai_src_addr, &r->ai_src_len, hints->ai_src_addr, hints->ai_src_len))) {
		rdma_freeaddrinfo(r);
		return -1;
	}
	*res = r;
	return 0;
}

/* rdma_getaddrinfo resolves node and service with getaddrinfo(3), as librdmacm
 * does for IP addresses: a passive lookup fills ai_src_addr, another ai_dst_addr
 * and takes ai_src_addr from the hints (where ucmatose's and udaddy's -b goes);
 * the port space and QP type are the hints' (RDMA_PS_TCP and IBV_QPT_RC when
 * none). With neither node nor service, the result is the hints' addresses
 * (librdmacm/addrinfo.c). */
XROCE_EXPORT int rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
				  struct rdma_addrinfo **res)
{
	struct addrinfo h = { .ai_socktype = SOCK_STREAM }, *ai;
	struct rdma_addrinfo *r;
	int passive = hints && (hints->ai_flags & RAI_PASSIVE);
	int ret;

	if (!res || (!node && !service && !hints))
		return fail(EINVAL);
	if (!node && !service)
		return getaddrinfo_hints(hints, res);
	if (hints) {
		h.ai_family = hints->ai_family;
		if (hints->ai_flags & RAI_NUMERICHOST)
			h.ai_flags |= AI_NUMERICHOST;
	}
	if (passive)
		h.ai_flags |= AI_PASSIVE;
	if ((ret = getaddrinfo(node, service, &h, &ai)))
		return fail(ret == EAI_SYSTEM ? errno : EADDRNOTAVAIL);
	if (!(r = calloc(1, sizeof(*r)))) {
		freeaddrinfo(ai);
		return fail(ENOMEM);
	}
	r->ai_flags = hints ? hints->ai_flags : 0;
	r->ai_family = ai->ai_family;
	r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
	r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
	ret = passive ? copy_addr(&r->ai_src_addr, &r->ai_src_len, ai->ai_addr, ai->ai_addrlen)
		      : copy_addr(&r->ai_dst_addr, &r->ai_dst_len, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	if (ret || (!r->ai_src_len && hints && hints->ai_src_len &&
		    copy_addr(&r->ai_src_addr, &r->ai_src_len, hints->ai_src_addr, hints->ai_src_len))) {
		rdma_freeaddrinfo(r);
		return -1;
	}
	*res = r;
	return 0;
}
