/*
 * cqoverrun: CQ overrun as rdma_rxe reports it (TestVerbsCQOverrun; rxe_cq.c
 * rxe_cq_post, rxe_comp.c and rxe_resp.c do_complete). Two pairs of RC QPs of one
 * context, connected to each other:
 *   - a's send CQ holds one completion and three signaled WRITEs complete: the
 *     first is polled, the other two are lost, each with IBV_EVENT_CQ_ERR; polling
 *     then returns 0 (never a negative value) and a stays in RTS: a fourth WRITE
 *     completes.
 *   - d's receive CQ holds one completion and c sends two SENDs into three
 *     receives: the second receive completion is lost, d moves to ERR (no
 *     IBV_EVENT_QP_FATAL) and its flushed third receive is lost too.
 * Prints what it saw, then "ok".
 */
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>
#include "rcpair.h"

static struct ibv_context *ctx;

/* events prints the asynchronous events that come within 300 ms, by name and
 * whose (the CQ named cq, or another). */
static void events(const char *side, struct ibv_cq *cq)
{
	struct ibv_async_event e;
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };

	printf("%s events:", side);
	while (poll(&p, 1, 300) == 1 && !ibv_get_async_event(ctx, &e)) {
		printf(" %s%s", ibv_event_type_str(e.event_type),
		       e.event_type == IBV_EVENT_CQ_ERR ? (e.element.cq == cq ? " (its CQ)" : " (another CQ)") : "");
		ibv_ack_async_event(&e);
	}
	printf("\n");
}

static enum ibv_qp_state state(struct ibv_qp *q)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	return ibv_query_qp(q, &a, IBV_QP_STATE, &ia) ? -1 : a.qp_state;
}

/* overran waits 300 ms for the completions of side's QP q to land in cq, unpolled,
 * then prints what two polls return, whether q is in state want, and the events. */
static void overran(const char *side, struct ibv_cq *cq, struct ibv_qp *q, enum ibv_qp_state want)
{
	struct ibv_wc wc[8];
	char what[32];
	int n, m;

	usleep(300000);
	n = ibv_poll_cq(cq, 8, wc);
	m = ibv_poll_cq(cq, 8, wc + 1);
	printf("%s side: polled %d (wr %d %s), then %d\n", side, n, n > 0 ? (int)wc[0].wr_id : -1,
	       n > 0 ? ibv_wc_status_str(wc[0].status) : "", m);
	printf("%s QP: %s%s\n", side, state(q) == want ? "" : "not ", want == IBV_QPS_RTS ? "RTS" : "ERR");
	snprintf(what, sizeof(what), "%s side", side);
	events(what, cq);
}

static struct ibv_qp *qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq)
{
	struct ibv_qp_init_attr a = { .send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *q = ibv_create_qp(pd, &a);

	if (!q)
		die("ibv_create_qp", errno);
	return q;
}

int main(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	static char buf[4096];
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *big, *one_s, *one_r;
	struct ibv_qp *a, *b, *c, *d;
	struct ibv_wc wc[8];
	union ibv_gid gid;
	int i, n, m;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!l || !l[0] || !(ctx = ibv_open_device(l[0])) || !(pd = ibv_alloc_pd(ctx)) || ibv_query_gid(ctx, 1, 1, &gid))
		die("device", errno);
	fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
	if (!(mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)))
		die("ibv_reg_mr", errno);
	if (!(big = ibv_create_cq(ctx, 64, NULL, NULL, 0)) || !(one_s = ibv_create_cq(ctx, 1, NULL, NULL, 0)) ||
	    !(one_r = ibv_create_cq(ctx, 1, NULL, NULL, 0)))
		die("ibv_create_cq", errno);
	a = qp(pd, one_s, big), b = qp(pd, big, big), c = qp(pd, big, big), d = qp(pd, big, one_r);
	connect_qp(a, b->qp_num, &gid, IBV_ACCESS_REMOTE_WRITE, 1);
	connect_qp(b, a->qp_num, &gid, IBV_ACCESS_REMOTE_WRITE, 1);
	connect_qp(c, d->qp_num, &gid, 0, 1);
	connect_qp(d, c->qp_num, &gid, 0, 1);

	for (i = 0; i < 4; i++) {
		struct ibv_sge s = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
		struct ibv_send_wr w = { .wr_id = i, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED, .wr.rdma = { (uintptr_t)buf + 1024, mr->rkey } }, *bad;

		if (ibv_post_send(a, &w, &bad))
			die("ibv_post_send", errno);
		if (i < 2)
			continue;
		if (i == 2) { /* three posted: wait for them, unpolled */
			overran("send", one_s, a, IBV_QPS_RTS);
			continue;
		}
		for (n = 0, m = 0; !n && m < 2000; m++, usleep(1000))
			n = ibv_poll_cq(one_s, 1, wc);
		printf("then: polled %d (wr %d %s)\n", n, n > 0 ? (int)wc[0].wr_id : -1, n > 0 ? ibv_wc_status_str(wc[0].status) : "");
	}

	for (i = 0; i < 3; i++) {
		struct ibv_sge s = { .addr = (uintptr_t)buf + 2048, .length = 64, .lkey = mr->lkey };
		struct ibv_recv_wr r = { .wr_id = 100 + i, .sg_list = &s, .num_sge = 1 }, *bad;

		if (ibv_post_recv(d, &r, &bad))
			die("ibv_post_recv", errno);
	}
	for (i = 0; i < 2; i++) {
		struct ibv_sge s = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
		struct ibv_send_wr w = { .wr_id = i, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;

		if (ibv_post_send(c, &w, &bad))
			die("ibv_post_send", errno);
	}
	overran("receive", one_r, d, IBV_QPS_ERR);
	printf("ok\n");
	return 0;
}
