/*
 * Shared receive queues: ibv_create_srq, ibv_modify_srq, ibv_query_srq,
 * ibv_destroy_srq and ibv_post_srq_recv (context->ops.post_srq_recv), over the
 * daemon's SRQ ops (cmd/xroce/daemon/srqproto.go). A receive posted to an SRQ
 * takes a slot of this library's table, which keeps its wr_id; the daemon's
 * engine names the slot in the CQE of the QP that took it (XROCE_CQE_SRQ), in any
 * order across QPs, and x_poll_cq frees it (srq_wr_id). Posting is one call to the
 * daemon per batch of WRs, not a ring: SRQ receives cost a system call each batch.
 */
#include "libxroce.h"

/* The most WRs an SRQ may be asked for (transport.MaxSRQWR), and what the daemon
 * then grants: rdma_rxe's 2^k - 1, the least such number not below n
 * (rxe_queue_init), at most SRQ_WR_LIMIT (cmd/xroce/daemon/srq.go, rxeSRQSlots). */
#define SRQ_WR_LIMIT 1048576u

static uint32_t rxe_slots(uint32_t n)
{
	uint32_t p = 1;

	while (p < n + 1)
		p <<= 1;
	return p - 1 < SRQ_WR_LIMIT ? p - 1 : SRQ_WR_LIMIT;
}

/* grow adds slots up to n to s's table; s->lock is held (or s is new). */
static int grow(struct xsrq *s, uint32_t n)
{
	uint64_t *w;
	uint32_t *f;

	if (n <= s->cap)
		return 0;
	if (!(w = realloc(s->wrid, n * sizeof(*w))))
		return ENOMEM;
	s->wrid = w;
	if (!(f = realloc(s->free, n * sizeof(*f))))
		return ENOMEM;
	s->free = f;
	for (uint32_t i = s->cap; i < n; i++)
		s->free[s->nfree++] = i;
	s->cap = n;
	return 0;
}

XROCE_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct xroce_create_srq_req req = {};
	struct xroce_create_srq_reply r;
	struct xctx *xc;
	struct xsrq *s;
	int ret;

	if (!pd || !attr || !(xc = ctx_of(pd->context))) {
		errno = EINVAL;
		return NULL;
	}
	if (!(s = calloc(1, sizeof(*s)))) {
		errno = ENOMEM;
		return NULL;
	}
	req.pd = pd->handle;
	req.max_wr = attr->attr.max_wr;
	req.max_sge = attr->attr.max_sge;
	req.limit = attr->attr.srq_limit;
	req.cookie = (uintptr_t)s;
	if ((ret = ctx_call(xc, XROCE_OP_CREATE_SRQ, &req, sizeof(req), &r, sizeof(r)))) {
		free(s);
		errno = ret;
		return NULL;
	}
	if (grow(s, r.max_wr)) {
		struct xroce_handle h = { .handle = r.handle };
		ctx_call(xc, XROCE_OP_DESTROY_SRQ, &h, sizeof(h), NULL, 0);
		free(s->wrid);
		free(s->free);
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	s->max_sge = r.max_sge;
	attr->attr.max_wr = r.max_wr; /* as providers do: the sizes granted */
	attr->attr.max_sge = r.max_sge;
	s->srq.context = pd->context;
	s->srq.srq_context = attr->srq_context;
	s->srq.pd = pd;
	s->srq.handle = r.handle;
	pthread_mutex_init(&s->srq.mutex, NULL);
	pthread_cond_init(&s->srq.cond, NULL);
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_lock(&xc->objs);
	s->next = xc->srqs;
	xc->srqs = s;
	pthread_mutex_unlock(&xc->objs);
	return &s->srq;
}

XROCE_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
	struct xsrq *s = (struct xsrq *)srq;
	struct xroce_srq_attr m = {};
	struct xctx *xc;
	int ret = 0;

	if (!srq || !attr || !(xc = ctx_of(srq->context)))
		return EINVAL;
	m.srq = srq->handle;
	m.mask = (uint32_t)mask;
	m.max_wr = attr->max_wr;
	m.limit = attr->srq_limit;
	if ((mask & IBV_SRQ_MAX_WR) && attr->max_wr <= SRQ_WR_LIMIT) { /* beyond: the daemon's EINVAL */
		pthread_mutex_lock(&s->lock);
		ret = grow(s, rxe_slots(attr->max_wr)); /* before the daemon takes more receives */
		pthread_mutex_unlock(&s->lock);
	}
	return ret ? ret : ctx_call(xc, XROCE_OP_MODIFY_SRQ, &m, sizeof(m), NULL, 0);
}

XROCE_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct xroce_handle h;
	struct xroce_srq_attr r;
	struct xctx *xc;
	int ret;

	if (!srq || !attr || !(xc = ctx_of(srq->context)))
		return EINVAL;
	h.handle = srq->handle;
	if ((ret = ctx_call(xc, XROCE_OP_QUERY_SRQ, &h, sizeof(h), &r, sizeof(r))))
		return ret;
	attr->max_wr = r.max_wr;
	attr->max_sge = r.max_sge;
	attr->srq_limit = r.limit;
	return 0;
}

XROCE_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	struct xsrq *s = (struct xsrq *)srq, **pp;
	struct xroce_handle h;
	struct xctx *xc;
	int ret;

	if (!srq || !(xc = ctx_of(srq->context)))
		return EINVAL;
	h.handle = srq->handle;
	if (destroy_failed(xc, ret = ctx_call(xc, XROCE_OP_DESTROY_SRQ, &h, sizeof(h), NULL, 0)))
		return ret; /* EBUSY while a QP uses it */
	pthread_mutex_lock(&xc->objs);
	for (pp = &xc->srqs; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&xc->objs);
	free(s->wrid);
	free(s->free);
	free(s);
	return 0;
}

/* srq_wr_id returns the wr_id of the SRQ receive in slot and frees the slot. */
uint64_t srq_wr_id(struct ibv_srq *srq, uint32_t slot)
{
	struct xsrq *s = (struct xsrq *)srq;
	uint64_t id = 0;

	pthread_mutex_lock(&s->lock);
	if (slot < s->cap) {
		id = s->wrid[slot];
		s->free[s->nfree++] = slot;
	}
	pthread_mutex_unlock(&s->lock);
	return id;
}

/* A batch of receives in one OP_POST_SRQ_RECV message. */
struct batch {
	unsigned char buf[XROCE_MAX_MESSAGE - XROCE_HDR_SIZE];
	size_t len;
	struct ibv_recv_wr *wr[XROCE_MAX_MESSAGE / sizeof(struct xroce_recv_wr)];
	uint32_t slot[XROCE_MAX_MESSAGE / sizeof(struct xroce_recv_wr)];
	uint32_t n;
};

/* send_batch posts b; the WRs the daemon did not take give their slots back and
 * the first of them is *bad. */
static int send_batch(struct xctx *xc, struct xsrq *s, struct batch *b, struct ibv_recv_wr **bad)
{
	struct xroce_post_srq_recv_req *h = (struct xroce_post_srq_recv_req *)b->buf;
	struct xroce_post_srq_recv_reply r;
	int ret;

	if (b->n == 0)
		return 0;
	h->srq = s->srq.handle;
	h->count = b->n;
	if ((ret = ctx_call(xc, XROCE_OP_POST_SRQ_RECV, b->buf, b->len, &r, sizeof(r)))) {
		r.posted = 0;
	} else if (r.posted > b->n) {
		r.posted = b->n;
		ret = EIO;
	} else {
		ret = r.posted < b->n ? (r.err ? r.err : EINVAL) : 0;
	}
	if (ret) {
		pthread_mutex_lock(&s->lock);
		for (uint32_t i = r.posted; i < b->n; i++)
			s->free[s->nfree++] = b->slot[i];
		pthread_mutex_unlock(&s->lock);
		*bad = b->wr[r.posted < b->n ? r.posted : 0];
	}
	b->n = 0;
	b->len = sizeof(*h);
	return ret;
}

int x_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct xsrq *s = (struct xsrq *)srq;
	struct xctx *xc = ctx_of(srq->context);
	struct batch *b;
	int ret = 0;

	if (!xc) {
		*bad = wr;
		return EINVAL;
	}
	if (!(b = malloc(sizeof(*b)))) {
		*bad = wr;
		return ENOMEM;
	}
	b->n = 0;
	b->len = sizeof(struct xroce_post_srq_recv_req);
	for (; wr && !ret; wr = wr->next) {
		struct xroce_recv_wr m = { .num_sge = (uint32_t)wr->num_sge };
		size_t need = sizeof(m) + (size_t)wr->num_sge * sizeof(struct xroce_sge);

		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > s->max_sge) {
			if (!(ret = send_batch(xc, s, b, bad))) {
				*bad = wr;
				ret = EINVAL;
			}
			break;
		}
		if (b->len + need > sizeof(b->buf) && (ret = send_batch(xc, s, b, bad)))
			break;
		pthread_mutex_lock(&s->lock);
		if (s->nfree == 0) {
			pthread_mutex_unlock(&s->lock);
			if (!(ret = send_batch(xc, s, b, bad))) {
				*bad = wr;
				ret = ENOMEM; /* more outstanding than max_wr, as on an HCA */
			}
			break;
		}
		m.wr_id = s->free[--s->nfree];
		s->wrid[m.wr_id] = wr->wr_id;
		pthread_mutex_unlock(&s->lock);
		b->wr[b->n] = wr;
		b->slot[b->n++] = (uint32_t)m.wr_id;
		memcpy(b->buf + b->len, &m, sizeof(m));
		b->len = put_sges(b->buf, b->len + sizeof(m), wr->sg_list, wr->num_sge);
	}
	if (!ret)
		ret = send_batch(xc, s, b, bad);
	free(b);
	return ret;
}
