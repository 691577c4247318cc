/*
 * The data path of libxroce: ibv_post_send, ibv_post_recv, ibv_poll_cq and the
 * ibv_wr_* batch write work requests into a QP's shared-memory rings and read
 * completions from a CQ's, which `xroce daemon` created and mapped too
 * (cmd/xroce/daemon/ring.go has the layout; docs/verbs-library.md §6 the design).
 * No system call per operation: posting writes slots and publishes the ring's
 * tail, then writes the doorbell eventfd only when the daemon said its engine may
 * be asleep; polling reads CQEs and publishes the consumer index.
 *
 * A send or receive slot is free again when the application polls the CQE that
 * names its sequence number (send completions free every slot up to theirs:
 * unsignaled WRs before a signaled one complete with it), so max_send_wr and
 * max_recv_wr bound the outstanding WRs as on an HCA (ENOMEM beyond), and the
 * daemon never reads a slot being rewritten. Checks an HCA makes at post time
 * are made here, so ibv_post_send's error and *bad_wr are those of rdma_rxe.
 */
#include "libxroce.h"

static uint32_t *word(unsigned char *ring, size_t off)
{
	return (uint32_t *)(ring + off);
}

int map_ring(int fd, uint64_t size, uint64_t need, uint32_t entries, unsigned char **ring)
{
	struct stat st;
	void *p;
	int ret = 0;

	if (!entries || (entries & (entries - 1)) || size < need || size > (1ull << 40) || fstat(fd, &st) < 0 ||
	    (uint64_t)st.st_size < size) {
		warnx("the daemon sent a ring of %llu bytes for %u entries: are the library and daemon from one build?",
		      (unsigned long long)size, entries);
		ret = EPROTO;
	} else if ((p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		ret = errno;
	} else {
		*ring = p;
	}
	close(fd);
	return ret;
}

/* qp_rings maps the rings the daemon created for q (r's layout, memfd fd). */
int qp_rings(struct xqp *q, const struct xroce_create_qp_reply *r, int fd)
{
	uint64_t send_end = r->sq_offset + (uint64_t)r->sq_entries * r->sq_stride;
	uint64_t recv_end = r->rq_offset + (uint64_t)r->rq_entries * r->rq_stride;
	int ret;

	if (r->sq_offset < XROCE_QP_RING_HEADER || r->rq_offset < send_end || r->sq_entries < r->max_send_wr ||
	    r->rq_entries < r->max_recv_wr || (r->rq_entries & (r->rq_entries - 1)) ||
	    r->sq_stride < sizeof(struct xroce_send_wr) + r->max_send_sge * sizeof(struct xroce_sge) ||
	    r->sq_stride < sizeof(struct xroce_send_wr) + r->max_inline ||
	    r->rq_stride < sizeof(struct xroce_recv_wr) + r->max_recv_sge * sizeof(struct xroce_sge)) {
		close(fd);
		warnx("the daemon sent a QP ring layout that does not hold its capabilities: are the library and daemon from one build?");
		return EPROTO;
	}
	if ((ret = map_ring(fd, r->ring_size, recv_end, r->sq_entries, &q->ring)))
		return ret;
	q->ring_size = r->ring_size;
	q->sq = q->ring + r->sq_offset;
	q->rq = q->ring + r->rq_offset;
	q->sq_entries = r->sq_entries;
	q->sq_stride = r->sq_stride;
	q->rq_entries = r->rq_entries;
	q->rq_stride = r->rq_stride;
	q->sq_wrid = calloc(r->sq_entries, sizeof(uint64_t));
	q->rq_wrid = calloc(r->rq_entries, sizeof(uint64_t));
	if (!q->sq_wrid || !q->rq_wrid) {
		qp_rings_free(q);
		return ENOMEM;
	}
	pthread_spin_init(&q->sq_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&q->rq_lock, PTHREAD_PROCESS_PRIVATE);
	return 0;
}

void qp_rings_free(struct xqp *q)
{
	if (q->ring) {
		munmap(q->ring, q->ring_size);
		pthread_spin_destroy(&q->sq_lock);
		pthread_spin_destroy(&q->rq_lock);
	}
	q->ring = NULL;
	close(q->db);
	free(q->sq_wrid);
	free(q->rq_wrid);
}

/* rings_reset: after RESET the work queues are empty (the daemon dropped what
 * it had not taken), so every slot is free. */
void rings_reset(struct xqp *q)
{
	pthread_spin_lock(&q->sq_lock);
	__atomic_store_n(&q->sq_head, q->sq_tail, __ATOMIC_RELEASE);
	pthread_spin_unlock(&q->sq_lock);
	pthread_spin_lock(&q->rq_lock);
	__atomic_store_n(&q->rq_head, q->rq_tail, __ATOMIC_RELEASE);
	pthread_spin_unlock(&q->rq_lock);
}

/* publish makes the slots up to tail visible to the daemon and rings the
 * doorbell if its engine may be asleep: the store of the tail, a full fence,
 * the load of the flag (the daemon raises the flag, fences, then reads the
 * tails), so either side sees the other's write. */
static void publish(struct xqp *q, size_t off, uint32_t tail)
{
	uint64_t one = 1;

	__atomic_store_n(word(q->ring, off), tail, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(word(q->ring, XROCE_QP_RING_SLEEPING), __ATOMIC_RELAXED) &&
	    write(q->db, &one, sizeof(one)) < 0 && errno != EAGAIN)
		warnx("the doorbell of QP %u failed: %s", q->qp.qp_num, strerror(errno));
}

/* send_state_ok: the states ibv_post_send accepts (rdma_rxe refuses before RTS;
 * in the error state WRs complete flushed). */
static int send_state_ok(enum ibv_qp_state s)
{
	return s == IBV_QPS_RTS || s == IBV_QPS_SQD || s == IBV_QPS_SQE || s == IBV_QPS_ERR;
}

static int is_atomic(uint32_t op)
{
	return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* service_ok: what the QP's service carries (IBTA Vol 1 Table 38; the engine's
 * checkUnreliable): UC no RDMA READ or atomics; UD SEND and SEND with immediate
 * only. A UD message longer than the port's MTU is posted: the engine completes
 * it successfully without sending it, as rdma_rxe does (C10-93.1.1). */
static int service_ok(const struct xqp *q, uint32_t opcode)
{
	switch (q->qp.qp_type) {
	case IBV_QPT_UC:
		return opcode != IBV_WR_RDMA_READ && !is_atomic(opcode);
	case IBV_QPT_UD:
		return opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM;
	default:
		return 1;
	}
}

/* check_send: the checks of the engine's PostSend (transport/post.go), made here
 * so a WR the daemon would refuse fails at post time: 0 or EINVAL. */
static int check_send(const struct xqp *q, uint32_t opcode, uint32_t num_sge, uint64_t total, int inl)
{
	if (!send_state_ok(q->qp.state) || num_sge > q->cap.max_send_sge || opcode > IBV_WR_ATOMIC_FETCH_AND_ADD ||
	    total > (1ull << 31) || (is_atomic(opcode) && total < 8) || (inl && total > q->cap.max_inline_data) ||
	    !service_ok(q, opcode))
		return EINVAL;
	return 0;
}

/* ud_ah_ok: a UD send's address handle is one of the QP's PD (the daemon
 * would stop the ring otherwise). */
int ud_ah_ok(const struct xqp *q, const struct ibv_ah *ah)
{
	return ah && ah->context == q->qp.context && ah->pd == q->qp.pd;
}

static uint32_t sq_free(struct xqp *q)
{
	return q->cap.max_send_wr - (q->sq_tail - __atomic_load_n(&q->sq_head, __ATOMIC_ACQUIRE));
}

/* put_send writes w into the next send slot: 0 or its errno. sq_lock is held. */
static int put_send(struct xqp *q, const struct ibv_send_wr *w)
{
	int inl = (w->send_flags & IBV_SEND_INLINE) && inline_op(w->opcode);
	struct xroce_send_wr m = { .opcode = w->opcode, .flags = w->send_flags, .imm_data = be32toh(w->imm_data) };
	uint32_t idx = q->sq_tail & (q->sq_entries - 1);
	unsigned char *slot = q->sq + (size_t)idx * q->sq_stride;
	uint64_t total = 0;
	size_t len = sizeof(m);
	int i, ret;

	if (w->num_sge < 0)
		return EINVAL;
	for (i = 0; i < w->num_sge; i++)
		total += w->sg_list[i].length;
	if ((ret = check_send(q, w->opcode, (uint32_t)w->num_sge, total, inl)))
		return ret;
	/* an atomic's remote address must be 8-byte aligned: rdma-core's rxe provider
	 * refuses it at post time (validate_send_wr in providers/rxe/rxe.c) */
	if (q->qp.qp_type != IBV_QPT_UD && is_atomic(w->opcode) && (w->wr.atomic.remote_addr & 7))
		return EINVAL;
	if (q->qp.qp_type == IBV_QPT_UD) {
		if (!ud_ah_ok(q, w->wr.ud.ah))
			return EINVAL;
		m.ah = w->wr.ud.ah->handle;
		m.remote_qpn = w->wr.ud.remote_qpn;
		m.remote_qkey = w->wr.ud.remote_qkey;
	}
	if (!sq_free(q))
		return ENOMEM;
	if (q->qp.qp_type == IBV_QPT_UD) {
		/* wr.ud shares wr's union with rdma and atomic */
	} else if (is_atomic(w->opcode)) {
		m.remote_addr = w->wr.atomic.remote_addr;
		m.rkey = w->wr.atomic.rkey;
		m.compare_add = w->wr.atomic.compare_add;
		m.swap = w->wr.atomic.swap;
	} else {
		m.remote_addr = w->wr.rdma.remote_addr;
		m.rkey = w->wr.rdma.rkey;
	}
	if (inl) {
		m.inline_len = (uint32_t)total;
		for (i = 0; i < w->num_sge; i++) {
			/* a plain copy, as mlx5's provider makes: the buffer is the caller's */
			memcpy(slot + len, (void *)(uintptr_t)w->sg_list[i].addr, w->sg_list[i].length);
			len += w->sg_list[i].length;
		}
	} else {
		m.num_sge = (uint32_t)w->num_sge;
		put_sges(slot, len, w->sg_list, w->num_sge);
	}
	memcpy(slot, &m, sizeof(m));
	q->sq_wrid[idx] = w->wr_id;
	q->sq_tail++;
	return 0;
}

int x_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct xqp *q = (struct xqp *)qp;
	uint32_t start;
	int ret = 0;

	if (!ctx_of(qp->context) || !q->ring) {
		*bad = wr;
		return EINVAL;
	}
	pthread_spin_lock(&q->sq_lock);
	start = q->sq_tail;
	for (; wr; wr = wr->next)
		if ((ret = put_send(q, wr))) {
			*bad = wr;
			break;
		}
	if (q->sq_tail != start)
		publish(q, XROCE_QP_RING_SQ_TAIL, q->sq_tail);
	pthread_spin_unlock(&q->sq_lock);
	return ret;
}

/* record_len is the length of a WR record of the ibv_wr_* batch. */
static size_t record_len(const struct xroce_send_wr *m)
{
	return sizeof(*m) + (m->inline_len ? m->inline_len : m->num_sge * sizeof(struct xroce_sge));
}

/* record_total is the byte count of a record's SGEs or inline data. */
static uint64_t record_total(const struct xroce_send_wr *m, const unsigned char *rec)
{
	struct xroce_sge e;
	uint64_t total = m->inline_len;
	uint32_t i;

	for (i = 0; i < m->num_sge; i++) {
		memcpy(&e, rec + sizeof(*m) + i * sizeof(e), sizeof(e));
		total += e.length;
	}
	return total;
}

/* sq_post_records posts the n WR records of an ibv_wr_* batch (xroce_send_wr,
 * then SGEs or inline data, back to back): all of them, or none with the errno
 * of the first that fails or ENOMEM when the send ring lacks room. */
int sq_post_records(struct xqp *q, const unsigned char *recs, uint32_t n)
{
	const unsigned char *r = recs;
	struct xroce_send_wr m;
	uint32_t i;
	int ret = 0;

	if (!n)
		return 0;
	pthread_spin_lock(&q->sq_lock);
	for (i = 0; i < n && !ret; i++) {
		memcpy(&m, r, sizeof(m));
		ret = check_send(q, m.opcode, m.num_sge, record_total(&m, r), m.inline_len != 0);
		if (!ret && q->qp.qp_type == IBV_QPT_UD && !m.ah)
			ret = EINVAL; /* no ibv_wr_set_ud_addr */
		r += record_len(&m);
	}
	if (!ret && sq_free(q) < n)
		ret = ENOMEM;
	for (i = 0, r = recs; i < n && !ret; i++) {
		uint32_t idx = q->sq_tail & (q->sq_entries - 1);

		memcpy(&m, r, sizeof(m));
		memcpy(q->sq + (size_t)idx * q->sq_stride, r, record_len(&m));
		q->sq_wrid[idx] = m.wr_id;
		q->sq_tail++;
		r += record_len(&m);
	}
	if (!ret)
		publish(q, XROCE_QP_RING_SQ_TAIL, q->sq_tail);
	pthread_spin_unlock(&q->sq_lock);
	return ret;
}

int x_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct xqp *q = (struct xqp *)qp;
	uint32_t start;
	int ret = 0;

	if (!ctx_of(qp->context) || !q->ring || qp->srq) { /* a QP with an SRQ: post to the SRQ (EINVAL, as rxe) */
		*bad = wr;
		return EINVAL;
	}
	pthread_spin_lock(&q->rq_lock);
	start = q->rq_tail;
	for (; wr; wr = wr->next) {
		uint32_t idx = q->rq_tail & (q->rq_entries - 1);
		unsigned char *slot = q->rq + (size_t)idx * q->rq_stride;
		struct xroce_recv_wr m = { .num_sge = (uint32_t)wr->num_sge };

		if (q->qp.state == IBV_QPS_RESET || wr->num_sge < 0 || (uint32_t)wr->num_sge > q->cap.max_recv_sge) {
			ret = EINVAL;
		} else if (q->rq_tail - __atomic_load_n(&q->rq_head, __ATOMIC_ACQUIRE) >= q->cap.max_recv_wr) {
			ret = ENOMEM;
		}
		if (ret) {
			*bad = wr;
			break;
		}
		memcpy(slot, &m, sizeof(m));
		put_sges(slot, sizeof(m), wr->sg_list, wr->num_sge);
		q->rq_wrid[idx] = wr->wr_id;
		q->rq_tail++;
	}
	if (q->rq_tail != start)
		publish(q, XROCE_QP_RING_RQ_TAIL, q->rq_tail);
	pthread_spin_unlock(&q->rq_lock);
	return ret;
}

/* ---- the context's QPs by number, for polling ---- */

void qp_table_add(struct xctx *xc, struct xqp *q)
{
	struct xqp **b = &xc->qps[q->qp.qp_num % QP_BUCKETS];

	pthread_mutex_lock(&xc->objs);
	q->hnext = *b;
	*b = q;
	pthread_mutex_unlock(&xc->objs);
}

void qp_table_del(struct xctx *xc, struct xqp *q)
{
	struct xqp **pp;

	pthread_mutex_lock(&xc->objs);
	for (pp = &xc->qps[q->qp.qp_num % QP_BUCKETS]; *pp; pp = &(*pp)->hnext)
		if (*pp == q) {
			*pp = q->hnext;
			break;
		}
	pthread_mutex_unlock(&xc->objs);
}

/* qp_find: objs is held. */
static struct xqp *qp_find(struct xctx *xc, uint32_t qpn)
{
	struct xqp *q;

	for (q = xc->qps[qpn % QP_BUCKETS]; q && q->qp.qp_num != qpn; q = q->hnext)
		;
	return q;
}

/* retire frees the slots up to seq (the CQE's WR) unless a RESET freed them
 * already: head only moves forward, and never past tail. */
static void retire(uint32_t *head, const uint32_t *tail, uint32_t seq)
{
	uint32_t h = __atomic_load_n(head, __ATOMIC_RELAXED);
	uint32_t t = __atomic_load_n(tail, __ATOMIC_RELAXED);

	if (seq + 1 - h <= t - h)
		__atomic_store_n(head, seq + 1, __ATOMIC_RELEASE);
}

/* fill_wc turns CQE e of q into wc and frees its slots. */
static void fill_wc(struct xqp *q, const struct xroce_cqe *e, struct ibv_wc *wc)
{
	memset(wc, 0, sizeof(*wc));
	if ((e->flags & XROCE_CQE_SRQ) && q->qp.srq) {
		wc->wr_id = srq_wr_id(q->qp.srq, e->seq);
	} else if (e->flags & XROCE_CQE_RECV) {
		wc->wr_id = q->rq_wrid[e->seq & (q->rq_entries - 1)];
		retire(&q->rq_head, &q->rq_tail, e->seq);
	} else {
		wc->wr_id = q->sq_wrid[e->seq & (q->sq_entries - 1)];
		retire(&q->sq_head, &q->sq_tail, e->seq);
	}
	wc->status = (enum ibv_wc_status)e->status;
	wc->opcode = (enum ibv_wc_opcode)e->opcode;
	wc->byte_len = e->byte_len;
	wc->qp_num = e->qp_num;
	if (e->flags & XROCE_CQE_WITH_IMM) {
		wc->imm_data = htobe32(e->imm_data);
		wc->wc_flags = IBV_WC_WITH_IMM;
	}
	if (e->flags & XROCE_CQE_GRH) {
		/* a UD receive: the buffer starts with the GRH area; slid, sl and
		 * pkey_index are 0, as rdma_rxe reports them on RoCE */
		wc->wc_flags |= IBV_WC_GRH;
		wc->src_qp = e->src_qp;
	}
	if ((e->flags & (XROCE_CQE_RECV | XROCE_CQE_SRQ)) && wc->status != IBV_WC_SUCCESS) {
		/* rdma_rxe fills a receive completion's opcode, byte_len and flags only on
		 * success (rxe_resp.c do_complete): an error or a flush reads 0 there */
		wc->opcode = 0;
		wc->byte_len = 0;
		wc->wc_flags = 0;
		wc->src_qp = 0;
	}
}

/* daemon_gone: the rings carry no system call, so an application spinning on an
 * empty CQ would not notice its daemon exit; every 4096th empty poll looks at the
 * control socket (one non-blocking poll(2)), which the daemon's exit hangs up.
 * (Every 64th empty poll yields the CPU: on a host with fewer cores than busy
 * threads, the daemon that would produce the completion may be waiting for it,
 * where an HCA, or rdma_rxe's softirq, never waits for the application.) */
static int daemon_gone(struct xctx *xc)
{
	if (!hung_up(xc->fd))
		return 0;
	if (!__atomic_exchange_n(&xc->gone, 1, __ATOMIC_RELAXED))
		warnx("the daemon at %s went away: restart it with `xroce daemon -d IFACE`", xc->xd->path);
	return 1;
}

/* cq_next_wc consumes CQEs up to prod until one of a QP this context still has,
 * which it turns into *wc: 1, or 0 when none is left. c->lock is held. */
static int cq_next_wc(struct xcq *c, struct xctx *xc, uint32_t prod, struct ibv_wc *wc)
{
	int found = 0;

	pthread_mutex_lock(&xc->objs);
	while (!found && c->cons != prod) {
		struct xroce_cqe e;
		struct xqp *q;

		memcpy(&e, c->ring + XROCE_CQ_RING_HEADER + (size_t)(c->cons & (c->entries - 1)) * sizeof(e), sizeof(e));
		c->cons++;
		if ((q = qp_find(xc, e.qp_num))) {
			fill_wc(q, &e, wc);
			found = 1;
		}
	}
	pthread_mutex_unlock(&xc->objs);
	return found;
}

/* cq_empty is what polling an empty CQ answers: 0, or -ENODEV when the daemon
 * went away. An overrun is no error here: rxe_poll_cq never returns one, and the CQ
 * goes on (IBV_EVENT_CQ_ERR told of the lost completions). c->lock is not held. */
static int cq_empty(struct xcq *c, struct xctx *xc)
{
	if ((++c->idle & 0x3f) == 0)
		sched_yield(); /* the daemon may wait for this CPU */
	return (c->idle & 0xfff) == 0 && daemon_gone(xc) ? -ENODEV : 0;
}

/* x_poll_cq is context->ops.poll_cq: up to n completions, oldest first; a
 * negative errno when the daemon went away (ENODEV), or when the ring is not one
 * the daemon wrote. CQEs of a QP destroyed meanwhile are dropped, as mlx5 cleans
 * them from its CQ. */
int x_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct xcq *c = (struct xcq *)cq;
	struct xctx *xc = ctx_of(cq->context);
	uint32_t prod;
	int got = 0;

	if (!xc || n < 0)
		return -EINVAL;
	pthread_spin_lock(&c->lock);
	prod = __atomic_load_n(word(c->ring, XROCE_CQ_RING_PROD), __ATOMIC_ACQUIRE);
	if (prod - c->cons > c->entries) {
		pthread_spin_unlock(&c->lock);
		return -EPROTO;
	}
	while (got < n && cq_next_wc(c, xc, prod, &wc[got]))
		got++;
	__atomic_store_n(word(c->ring, XROCE_CQ_RING_CONS), c->cons, __ATOMIC_RELEASE);
	pthread_spin_unlock(&c->lock);
	return got ? got : cq_empty(c, xc);
}

/* ---- the extended CQ's polling (ibv_create_cq_ex; verbs.h ibv_start_poll) ---- */

static struct xcq *xcq_of(struct ibv_cq_ex *cq)
{
	return (struct xcq *)cq;
}

static void cur_out(struct xcq *c)
{
	c->cqx.status = c->cur.status;
	c->cqx.wr_id = c->cur.wr_id;
}

/* x_start_poll takes the CQ's lock and the first completion: 0, or ENOENT (the
 * lock released: no ibv_end_poll follows) or another errno, as verbs says. */
static int x_start_poll(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *attr)
{
	struct xcq *c = xcq_of(cq);
	struct xctx *xc = ctx_of(cq->context);
	int ret;

	if (!xc || !attr || attr->comp_mask)
		return EINVAL;
	pthread_spin_lock(&c->lock);
	c->prod = __atomic_load_n(word(c->ring, XROCE_CQ_RING_PROD), __ATOMIC_ACQUIRE);
	if (c->prod - c->cons <= c->entries && cq_next_wc(c, xc, c->prod, &c->cur)) {
		cur_out(c);
		return 0;
	}
	ret = c->prod - c->cons > c->entries ? EPROTO : 0;
	__atomic_store_n(word(c->ring, XROCE_CQ_RING_CONS), c->cons, __ATOMIC_RELEASE);
	pthread_spin_unlock(&c->lock);
	if (!ret)
		ret = -cq_empty(c, xc);
	return ret ? ret : ENOENT;
}

static int x_next_poll(struct ibv_cq_ex *cq)
{
	struct xcq *c = xcq_of(cq);

	if (!cq_next_wc(c, ctx_of(cq->context), c->prod, &c->cur))
		return ENOENT;
	cur_out(c);
	return 0;
}

static void x_end_poll(struct ibv_cq_ex *cq)
{
	struct xcq *c = xcq_of(cq);

	__atomic_store_n(word(c->ring, XROCE_CQ_RING_CONS), c->cons, __ATOMIC_RELEASE);
	pthread_spin_unlock(&c->lock);
}

static enum ibv_wc_opcode x_read_opcode(struct ibv_cq_ex *cq) { return xcq_of(cq)->cur.opcode; }
static uint32_t x_read_vendor_err(struct ibv_cq_ex *cq) { return xcq_of(cq)->cur.vendor_err; }
static uint32_t x_read_byte_len(struct ibv_cq_ex *cq) { return xcq_of(cq)->cur.byte_len; }
static __be32 x_read_imm_data(struct ibv_cq_ex *cq) { return xcq_of(cq)->cur.imm_data; }
static uint32_t x_read_qp_num(struct ibv_cq_ex *cq) { return xcq_of(cq)->cur.qp_num; }
static uint32_t x_read_src_qp(struct ibv_cq_ex *cq) { return xcq_of(cq)->cur.src_qp; }
static unsigned int x_read_wc_flags(struct ibv_cq_ex *cq) { return xcq_of(cq)->cur.wc_flags; }
static uint32_t x_read_slid(struct ibv_cq_ex *cq) { return xcq_of(cq)->cur.slid; }
static uint8_t x_read_sl(struct ibv_cq_ex *cq) { return xcq_of(cq)->cur.sl; }
static uint8_t x_read_dlid_path_bits(struct ibv_cq_ex *cq) { return xcq_of(cq)->cur.dlid_path_bits; }

/* cq_ex_ops sets the extended CQ's functions: the standard fields, the ones
 * rdma_rxe's provider serves (RXE_SUP_WC_FLAGS). */
void cq_ex_ops(struct ibv_cq_ex *cq)
{
	cq->start_poll = x_start_poll;
	cq->next_poll = x_next_poll;
	cq->end_poll = x_end_poll;
	cq->read_opcode = x_read_opcode;
	cq->read_vendor_err = x_read_vendor_err;
	cq->read_byte_len = x_read_byte_len;
	cq->read_imm_data = x_read_imm_data;
	cq->read_qp_num = x_read_qp_num;
	cq->read_src_qp = x_read_src_qp;
	cq->read_wc_flags = x_read_wc_flags;
	cq->read_slid = x_read_slid;
	cq->read_sl = x_read_sl;
	cq->read_dlid_path_bits = x_read_dlid_path_bits;
}
