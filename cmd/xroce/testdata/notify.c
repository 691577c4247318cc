/*
 * notify: ibv_req_notify_cq as rdma_rxe implements it (rxe_req_notify_cq in
 * rxe_verbs.c, rxe_cq_post in rxe_cq.c). Two RC QPs of one context, connected to
 * each other through the GID in argv[1] (the device's own), SEND to each other; the
 * receiving QP's CQ has a completion channel. Prints one line a step, then "ok":
 *   - armed for solicited completions only, an unsolicited SEND raises no event;
 *   - a SEND with IBV_SEND_SOLICITED does;
 *   - arming a CQ that already holds a completion raises none, the next completion does;
 *   - armed for any completion, then for solicited ones, the next completion of any kind does.
 * TestVerbsNotify runs it through xroce run.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>
#include "rcpair.h"

static struct ibv_qp *qa, *qb;
static struct ibv_cq *scq, *rcq;
static struct ibv_comp_channel *ch;
static struct ibv_sge sge;

/* one waits up to 5 s for a completion on cq and returns its status. */
static int one(struct ibv_cq *cq)
{
	struct timespec t0, t;
	struct ibv_wc wc;
	int n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		if ((n = ibv_poll_cq(cq, 1, &wc)) == 1)
			return wc.status;
		if (n < 0)
			die("ibv_poll_cq", -n);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < 5);
	die("no completion in 5 s", ETIMEDOUT);
	return -1;
}

/* xsend posts a SEND from qa to qb (with IBV_SEND_SOLICITED when solicited) and
 * waits for its completion, which comes after qb's receive completed. */
static void xsend(int solicited)
{
	struct ibv_send_wr w = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED | (solicited ? IBV_SEND_SOLICITED : 0) }, *bad;
	int ret;

	if ((ret = ibv_post_send(qa, &w, &bad)))
		die("ibv_post_send", ret);
	if (one(scq) != IBV_WC_SUCCESS)
		die("SEND completion", EIO);
}

/* event reports whether the channel has an event within ms, and takes it. */
static int event(int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct ibv_cq *cq;
	void *cookie;
	int n = poll(&p, 1, ms);

	if (n < 0)
		die("poll", errno);
	if (n == 0)
		return 0;
	if (ibv_get_cq_event(ch, &cq, &cookie) || cq != rcq)
		die("ibv_get_cq_event", errno);
	ibv_ack_cq_events(cq, 1);
	return 1;
}

int main(int argc, char **argv)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qi = { .qp_type = IBV_QPT_RC, .cap = { 8, 8, 1, 1, 0 } };
	struct ibv_recv_wr rw = { .sg_list = &sge, .num_sge = 1 }, *brw;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	static char buf[4096];
	union ibv_gid gid;
	int i, ret;

	if (argc != 2 || !l || !l[0] || !(ctx = ibv_open_device(l[0])) || !(pd = ibv_alloc_pd(ctx)) ||
	    inet_pton(AF_INET6, argv[1], &gid) != 1)
		return printf("usage: notify OWN-GID (with an xroce device)\n"), 1;
	if (!(ch = ibv_create_comp_channel(ctx)) || !(scq = ibv_create_cq(ctx, 16, NULL, NULL, 0)) ||
	    !(rcq = ibv_create_cq(ctx, 16, NULL, ch, 0)))
		die("CQs", errno);
	if (!(mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE)))
		die("ibv_reg_mr", errno);
	sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	qi.send_cq = scq;
	qi.recv_cq = rcq;
	if (!(qa = ibv_create_qp(pd, &qi)) || !(qb = ibv_create_qp(pd, &qi)))
		die("ibv_create_qp", errno);
	connect_qp(qa, qb->qp_num, &gid, IBV_ACCESS_LOCAL_WRITE, 1);
	connect_qp(qb, qa->qp_num, &gid, IBV_ACCESS_LOCAL_WRITE, 1);
	for (i = 0; i < 8; i++)
		if ((ret = ibv_post_recv(qb, &rw, &brw)))
			die("ibv_post_recv", ret);

	ibv_req_notify_cq(rcq, 1);
	xsend(0);
	if (one(rcq) != IBV_WC_SUCCESS)
		die("receive", EIO);
	printf("solicited only, unsolicited SEND: event %d\n", event(300));
	xsend(1);
	printf("solicited only, solicited SEND: event %d\n", event(5000));
	one(rcq);

	xsend(0); /* left in the CQ */
	ibv_req_notify_cq(rcq, 0);
	printf("armed with a completion queued: event %d\n", event(300));
	xsend(0);
	printf("the next completion: event %d\n", event(5000));
	one(rcq);
	one(rcq);

	ibv_req_notify_cq(rcq, 0);
	ibv_req_notify_cq(rcq, 1);
	xsend(0);
	printf("armed for any, then for solicited, unsolicited SEND: event %d\n", event(5000));
	one(rcq);
	printf("ok\n");
	return 0;
}
