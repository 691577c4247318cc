/*
 * cqex: ibv_create_cq_ex and the ibv_start_poll/next_poll/end_poll loop, with
 * completions made locally: an RC QP in RTS (towards the GID in argv[1]) posts a
 * receive and a SEND with a bad lkey; the SEND completes with
 * IBV_WC_LOC_QP_OP_ERR (as rdma_rxe's), the QP goes to ERR and the receive is flushed. Prints one
 * line per completion, then "ok". TestVerbsCQEx runs it through xroce run.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static int fail(const char *what, int e)
{
	printf("%s: %s\n", what, strerror(e));
	return 1;
}

int main(int argc, char **argv)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_cq_init_attr_ex ca = { .cqe = 16, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM };
	struct ibv_poll_cq_attr pa = {};
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC, .cap = { 4, 4, 1, 1, 0 } };
	struct ibv_qp_attr m = {};
	struct ibv_context *ctx;
	struct ibv_cq_ex *cq;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	static char buf[4096];
	struct ibv_sge sge;
	struct ibv_recv_wr rw = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *brw;
	struct ibv_send_wr sw = { .wr_id = 2, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bsw;
	int n = 0, ret, tries;

	if (argc != 2 || !l || !l[0] || !(ctx = ibv_open_device(l[0])) || !(pd = ibv_alloc_pd(ctx)))
		return printf("usage: cqex PEER-GID (with an xroce device)\n"), 1;
	ca.wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	if (ibv_create_cq_ex(ctx, &ca) || errno != EOPNOTSUPP)
		return printf("timestamps: %s, want EOPNOTSUPP\n", strerror(errno)), 1;
	ca.wc_flags &= ~(uint64_t)IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	if (!(cq = ibv_create_cq_ex(ctx, &ca)))
		return fail("ibv_create_cq_ex", errno);
	if ((ret = ibv_start_poll(cq, &pa)) != ENOENT)
		return printf("empty start_poll: %d, want ENOENT\n", ret), 1;
	if (!(mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE)))
		return fail("ibv_reg_mr", errno);
	qa.send_cq = qa.recv_cq = ibv_cq_ex_to_cq(cq);
	if (!(qp = ibv_create_qp(pd, &qa)))
		return fail("ibv_create_qp", errno);
	m.qp_state = IBV_QPS_INIT;
	m.port_num = 1;
	if ((ret = ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)))
		return fail("INIT", ret);
	m.qp_state = IBV_QPS_RTR;
	m.path_mtu = IBV_MTU_1024;
	m.dest_qp_num = 17;
	m.max_dest_rd_atomic = 1;
	m.min_rnr_timer = 12;
	m.ah_attr.is_global = 1;
	m.ah_attr.grh.sgid_index = 1;
	m.ah_attr.grh.hop_limit = 1;
	m.ah_attr.port_num = 1;
	if (inet_pton(AF_INET6, argv[1], m.ah_attr.grh.dgid.raw) != 1)
		return printf("bad GID %s\n", argv[1]), 1;
	if ((ret = ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
		return fail("RTR", ret);
	m.qp_state = IBV_QPS_RTS;
	m.timeout = 14;
	m.retry_cnt = 7;
	m.rnr_retry = 7;
	m.max_rd_atomic = 1;
	if ((ret = ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC)))
		return fail("RTS", ret);
	sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	if ((ret = ibv_post_recv(qp, &rw, &brw)))
		return fail("post recv", ret);
	sge.lkey = mr->lkey + 1; /* no such region: IBV_WC_LOC_QP_OP_ERR */
	if ((ret = ibv_post_send(qp, &sw, &bsw)))
		return fail("post send", ret);
	for (tries = 0; n < 2 && tries < 5000; tries++) {
		if ((ret = ibv_start_poll(cq, &pa)) == ENOENT) {
			usleep(1000);
			continue;
		}
		if (ret)
			return fail("start_poll", ret);
		do {
			printf("wr_id %llu status %s opcode %d qp_num %s\n", (unsigned long long)cq->wr_id,
			       ibv_wc_status_str(cq->status), ibv_wc_read_opcode(cq),
			       ibv_wc_read_qp_num(cq) == qp->qp_num ? "ok" : "wrong");
			n++;
		} while ((ret = ibv_next_poll(cq)) == 0);
		ibv_end_poll(cq);
		if (ret != ENOENT)
			return fail("next_poll", ret);
	}
	if (n != 2)
		return printf("%d completions\n", n), 1;
	if (ibv_destroy_qp(qp) || ibv_dereg_mr(mr) || ibv_destroy_cq(ibv_cq_ex_to_cq(cq)))
		return printf("destroy\n"), 1;
	printf("ok\n");
	return 0;
}
