//go:build verbs

// C helpers for package verbs: one call per work request, so cgo passes scalars
// and the unions of struct ibv_send_wr stay on the C side.
#include "xverbs.h"
#include <arpa/inet.h>
#include <string.h>
#include <errno.h>

// One work request with sge_n scatter/gather elements from sge; returns errno.
int xr_post_send(struct ibv_qp *qp, uint64_t wr_id, int opcode, int flags,
		struct ibv_sge *sge, int sge_n, uint64_t raddr, uint32_t rkey,
		uint64_t compare_add, uint64_t swap, uint32_t imm) {
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	wr.opcode = (enum ibv_wr_opcode)opcode;
	wr.send_flags = (unsigned int)flags;
	wr.sg_list = sge;
	wr.num_sge = sge_n;
	wr.imm_data = htonl(imm);
	if (opcode == IBV_WR_ATOMIC_CMP_AND_SWP || opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = compare_add;
		wr.wr.atomic.swap = swap;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}

int xr_post_recv(struct ibv_qp *qp, uint64_t wr_id, struct ibv_sge *sge, int sge_n) {
	struct ibv_recv_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	wr.sg_list = sge;
	wr.num_sge = sge_n;
	return ibv_post_recv(qp, &wr, &bad);
}

int xr_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) { return ibv_poll_cq(cq, n, wc); }

uint32_t xr_wc_imm(struct ibv_wc *wc) { return ntohl(wc->imm_data); }

// xr_gid returns 0 and the GID's bytes and RoCE type (IBV_GID_TYPE_*) at index, or
// an errno (ENODATA for an empty slot).
int xr_gid(struct ibv_context *ctx, int index, uint8_t *raw, int *type) {
	struct ibv_gid_entry e;
	int rc = ibv_query_gid_ex(ctx, 1, index, &e, 0);
	if (rc) return rc;
	memcpy(raw, e.gid.raw, 16);
	*type = e.gid_type;
	return 0;
}

int xr_modify_qp(struct ibv_qp *qp, int mask, int state, int access, int mtu, uint32_t dqpn,
		uint32_t rq_psn, uint32_t sq_psn, int max_rd, int max_dest_rd, int min_rnr, int timeout,
		int retry, int rnr_retry, const uint8_t *dgid, int sgid_index, int tclass, int hop_limit,
		uint32_t flow_label) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = (enum ibv_qp_state)state;
	a.qp_access_flags = (unsigned int)access;
	a.pkey_index = 0;
	a.port_num = 1;
	a.path_mtu = (enum ibv_mtu)mtu;
	a.dest_qp_num = dqpn;
	a.rq_psn = rq_psn;
	a.sq_psn = sq_psn;
	a.max_rd_atomic = (uint8_t)max_rd;
	a.max_dest_rd_atomic = (uint8_t)max_dest_rd;
	a.min_rnr_timer = (uint8_t)min_rnr;
	a.timeout = (uint8_t)timeout;
	a.retry_cnt = (uint8_t)retry;
	a.rnr_retry = (uint8_t)rnr_retry;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	memcpy(a.ah_attr.grh.dgid.raw, dgid, 16);
	a.ah_attr.grh.sgid_index = (uint8_t)sgid_index;
	a.ah_attr.grh.traffic_class = (uint8_t)tclass;
	a.ah_attr.grh.hop_limit = (uint8_t)hop_limit;
	a.ah_attr.grh.flow_label = flow_label;
	return ibv_modify_qp(qp, &a, mask);
}

// xr_query_port reads port 1's active MTU (enum ibv_mtu) and GID table length;
// ibv_query_port is a macro cgo cannot call. Returns an errno.
int xr_query_port(struct ibv_context *ctx, int *active_mtu, int *gid_tbl_len) {
	struct ibv_port_attr a;
	int rc = ibv_query_port(ctx, 1, &a);
	if (rc) return rc;
	*active_mtu = a.active_mtu;
	*gid_tbl_len = a.gid_tbl_len;
	return 0;
}
