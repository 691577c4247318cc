/*
 * modifyqp: ibv_modify_qp's attribute masks as the kernel's uverbs layer checks them
 * for rdma_rxe (drivers/infiniband/core/verbs.c qp_state_table, ib_modify_qp_is_ok;
 * TestVerbsModifyQP). An RC QP connected to itself goes RESET → INIT → RTR → RTS →
 * SQD → RTS, each step first tried with masks the kernel refuses (EINVAL, the QP
 * unchanged) or takes although the engine has no use for them. Prints each try's
 * result, then "ok".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

static struct ibv_qp *q;
static union ibv_gid gid;

static void try(const char *what, struct ibv_qp_attr *a, int mask)
{
	printf("%s: %d\n", what, ibv_modify_qp(q, a, mask));
}

static void rtr(struct ibv_qp_attr *a, int port)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = IBV_MTU_1024;
	a->dest_qp_num = q->qp_num;
	a->max_dest_rd_atomic = 1;
	a->min_rnr_timer = 12;
	a->ah_attr.is_global = 1;
	a->ah_attr.grh.dgid = gid;
	a->ah_attr.grh.sgid_index = 1;
	a->ah_attr.grh.hop_limit = 64;
	a->ah_attr.port_num = port;
	a->alt_ah_attr = a->ah_attr;
	a->alt_port_num = 1;
}

int main(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp_attr a;
	const int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	const int rts_mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			     IBV_QP_MAX_QP_RD_ATOMIC;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!l || !l[0] || !(ctx = ibv_open_device(l[0])) || !(pd = ibv_alloc_pd(ctx)) || ibv_query_gid(ctx, 1, 1, &gid) ||
	    !(cq = ibv_create_cq(ctx, 16, NULL, NULL, 0)))
		return printf("device: %s\n", strerror(errno)), 1;
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	if (!(q = ibv_create_qp(pd, &ia)))
		return printf("ibv_create_qp: %s\n", strerror(errno)), 1;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	try("RESET to ERR", &a, IBV_QP_STATE);
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	try("RESET, access flags without a state", &a, IBV_QP_ACCESS_FLAGS);
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	try("RESET to INIT without a port", &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS);
	try("RESET to INIT with a current state", &a, IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	try("RESET to INIT", &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);

	rtr(&a, 2);
	try("INIT to RTR on port 2", &a, rtr_mask);
	rtr(&a, 1);
	try("INIT to RTR with an alternate path", &a, rtr_mask | IBV_QP_ALT_PATH);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.cur_qp_state = IBV_QPS_RTR;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	a.path_mig_state = IBV_MIG_MIGRATED;
	try("RTR to RTS with a path migration state", &a, rts_mask | IBV_QP_CUR_STATE | IBV_QP_PATH_MIG_STATE);
	try("RTS to RTS with a timeout", &a, IBV_QP_STATE | IBV_QP_TIMEOUT);
	try("RTS to RTS claiming to be in RTR", &a, IBV_QP_STATE | IBV_QP_CUR_STATE);
	a.min_rnr_timer = 14;
	try("RTS to RTS with an RNR timer", &a, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER);

	a.qp_state = IBV_QPS_SQD;
	a.en_sqd_async_notify = 1;
	try("RTS to SQD with async notify", &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY);
	rtr(&a, 1);
	a.qp_state = IBV_QPS_SQD;
	a.port_num = 1;
	try("SQD to SQD with a path and a port", &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PORT | IBV_QP_PKEY_INDEX);
	a.qp_state = IBV_QPS_RTS;
	try("SQD to RTS", &a, IBV_QP_STATE);
	printf("ok\n");
	return 0;
}
