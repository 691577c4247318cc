/*
 * rxeattrs: values and checks an application sees as rdma_rxe gives them. Prints
 * one line each, then "ok" (TestVerbsRxeAttrs):
 *   - ibv_create_cq rounds cqe up to 2^k − 1 (rxe_queue_init, rxe_cq_from_init),
 *     and so do ibv_create_srq's max_wr (rxe_srq_from_init writes it back) and
 *     ibv_modify_srq's (ibv_query_srq reads it back), which then hold that many;
 *     an SRQ of 0 WRs is refused with EINVAL (rxe_srq_chk_init);
 *   - a QP asked for 0 send WRs and 0 SGEs reports 0 and 0 (rxe_init_sq), and
 *     a post to it fails with ENOMEM;
 *   - ibv_query_qp reports the SRQ a QP was created with (ibv_cmd_query_qp);
 *   - ibv_modify_qp reads attr->qp_state only under IBV_QP_STATE (uverbs modify_qp);
 *   - max_rd_atomic and max_dest_rd_atomic read back rounded up to a power of two
 *     (rxe_qp_from_attr);
 *   - an atomic to a remote address not 8-byte aligned fails at post time with
 *     EINVAL (validate_send_wr in rdma-core's providers/rxe/rxe.c); an aligned one
 *     executes;
 *   - a QP moved from RTS to SQD with nothing outstanding raises
 *     IBV_EVENT_SQ_DRAINED (req_next_wqe in rxe_req.c).
 * argv[1] is the device's own GID: the QPs connect to each other.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <stdint.h>
#include <time.h>
#include "rcpair.h"

int main(int argc, char **argv)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_srq_init_attr si = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_qp_init_attr qi = { .qp_type = IBV_QPT_RC, .cap = { 4, 4, 1, 1, 0 } }, got;
	struct ibv_qp_attr m, q;
	struct ibv_context *ctx;
	struct ibv_cq *cq2, *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qs, *qa, *qb;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	static uint64_t buf[512];
	struct ibv_sge sge;
	struct ibv_send_wr w = { .wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;
	struct timespec t0, t;
	union ibv_gid gid;
	int n, ret;

	if (argc != 2 || !l || !l[0] || !(ctx = ibv_open_device(l[0])) || !(pd = ibv_alloc_pd(ctx)) ||
	    inet_pton(AF_INET6, argv[1], &gid) != 1)
		return printf("usage: rxeattrs OWN-GID (with an xroce device)\n"), 1;
	if (!(cq2 = ibv_create_cq(ctx, 2, NULL, NULL, 0)) || !(cq = ibv_create_cq(ctx, 16, NULL, NULL, 0)))
		die("ibv_create_cq", errno);
	printf("cqe 2 -> %d, cqe 16 -> %d\n", cq2->cqe, cq->cqe);

	si.attr.max_wr = 0;
	errno = 0;
	srq = ibv_create_srq(pd, &si);
	printf("create_srq max_wr 0: %s errno %d\n", srq ? "an SRQ" : "NULL", errno);
	si.attr.max_wr = 4;
	if (!(srq = ibv_create_srq(pd, &si)))
		die("ibv_create_srq", errno);
	printf("srq max_wr 4 -> %u\n", si.attr.max_wr);
	{
		struct ibv_srq_attr sa = { .max_wr = 8 };
		struct ibv_recv_wr r = { .wr_id = 1 }, *rbad;
		int posted = 0;

		if ((ret = ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR)) || (ret = ibv_query_srq(srq, &sa)))
			die("ibv_modify_srq", ret);
		while ((ret = ibv_post_srq_recv(srq, &r, &rbad)) == 0 && posted < 100)
			posted++;
		printf("modify_srq max_wr 8 -> %u; posted %d, then %d\n", sa.max_wr, posted, ret);
	}
	{
		struct ibv_qp_init_attr z = { .qp_type = IBV_QPT_RC, .send_cq = cq, .recv_cq = cq, .cap = { 0, 1, 0, 1, 0 } };
		struct ibv_send_wr s0 = { .wr_id = 1, .opcode = IBV_WR_SEND }, *sbad;
		struct ibv_qp *qz = ibv_create_qp(pd, &z);

		if (!qz)
			die("ibv_create_qp with 0 send WRs", errno);
		connect_qp(qz, qz->qp_num, &gid, IBV_ACCESS_LOCAL_WRITE, 1);
		printf("qp max_send_wr 0 -> %u, max_send_sge 0 -> %u; post_send %d\n", z.cap.max_send_wr, z.cap.max_send_sge,
		       ibv_post_send(qz, &s0, &sbad));
		ibv_destroy_qp(qz);
	}
	qi.send_cq = qi.recv_cq = cq;
	qi.srq = srq;
	if (!(qs = ibv_create_qp(pd, &qi)))
		die("ibv_create_qp", errno);
	if ((ret = ibv_query_qp(qs, &q, IBV_QP_STATE, &got)))
		die("ibv_query_qp", ret);
	printf("query_qp: init_attr.srq %s\n", got.srq == srq ? "is the QP's SRQ" : "is not the QP's SRQ");

	memset(&m, 0, sizeof(m));
	m.qp_state = IBV_QPS_INIT;
	m.port_num = 1;
	if ((ret = ibv_modify_qp(qs, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)))
		die("INIT", ret);
	memset(&m, 0xff, sizeof(m)); /* nothing outside the mask is read */
	m.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	printf("modify_qp ACCESS_FLAGS with qp_state 0x%x outside the mask: %d\n", (unsigned)m.qp_state,
	       ibv_modify_qp(qs, &m, IBV_QP_ACCESS_FLAGS));

	qi.srq = NULL;
	if (!(mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC)))
		die("ibv_reg_mr", errno);
	if (!(qa = ibv_create_qp(pd, &qi)) || !(qb = ibv_create_qp(pd, &qi)))
		die("ibv_create_qp", errno);
	connect_qp(qa, qb->qp_num, &gid, IBV_ACCESS_LOCAL_WRITE, 3);
	connect_qp(qb, qa->qp_num, &gid, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC, 3);
	if ((ret = ibv_query_qp(qa, &q, IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC, &got)))
		die("ibv_query_qp", ret);
	printf("max_rd_atomic 3 -> %d, max_dest_rd_atomic 3 -> %d\n", q.max_rd_atomic, q.max_dest_rd_atomic);

	buf[1] = 40;
	sge = (struct ibv_sge){ .addr = (uintptr_t)&buf[0], .length = 8, .lkey = mr->lkey };
	w.wr.atomic.rkey = mr->rkey;
	w.wr.atomic.compare_add = 2;
	w.wr.atomic.remote_addr = (uintptr_t)&buf[1] + 4;
	printf("atomic to a misaligned address: %d\n", ibv_post_send(qa, &w, &bad));
	w.wr.atomic.remote_addr = (uintptr_t)&buf[1];
	printf("atomic to an aligned address: %d\n", ibv_post_send(qa, &w, &bad));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= 5)
			die("no completion in 5 s", ETIMEDOUT);
	}
	if (n < 0)
		die("ibv_poll_cq", -n);
	printf("its completion: wr_id %llu status %d, fetched %llu, memory now %llu\n", (unsigned long long)wc.wr_id,
	       wc.status, (unsigned long long)buf[0], (unsigned long long)buf[1]);

	/* RTS -> SQD with nothing outstanding: IBV_EVENT_SQ_DRAINED at once */
	memset(&m, 0, sizeof(m));
	m.qp_state = IBV_QPS_SQD;
	if ((ret = ibv_modify_qp(qa, &m, IBV_QP_STATE)))
		die("SQD", ret);
	{
		struct pollfd pf = { .fd = ctx->async_fd, .events = POLLIN };
		struct ibv_async_event ev;

		if (poll(&pf, 1, 5000) != 1 || ibv_get_async_event(ctx, &ev))
			die("no asynchronous event in 5 s", ETIMEDOUT);
		printf("after SQD: %s, %s\n", ibv_event_type_str(ev.event_type), ev.element.qp == qa ? "its QP" : "another QP");
		ibv_ack_async_event(&ev);
	}
	printf("ok\n");
	return 0;
}
