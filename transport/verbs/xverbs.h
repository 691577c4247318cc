// Declarations of the C helpers in xverbs.c (package verbs, build tag verbs).
#include <stdint.h>
#include <infiniband/verbs.h>

int xr_post_send(struct ibv_qp *qp, uint64_t wr_id, int opcode, int flags, struct ibv_sge *sge, int sge_n,
	uint64_t raddr, uint32_t rkey, uint64_t compare_add, uint64_t swap, uint32_t imm);
int xr_post_recv(struct ibv_qp *qp, uint64_t wr_id, struct ibv_sge *sge, int sge_n);
int xr_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
uint32_t xr_wc_imm(struct ibv_wc *wc);
int xr_gid(struct ibv_context *ctx, int index, uint8_t *raw, int *type);
int xr_query_port(struct ibv_context *ctx, int *active_mtu, int *gid_tbl_len);
int xr_modify_qp(struct ibv_qp *qp, int mask, int state, int access, int mtu, uint32_t dqpn,
	uint32_t rq_psn, uint32_t sq_psn, int max_rd, int max_dest_rd, int min_rnr, int timeout,
	int retry, int rnr_retry, const uint8_t *dgid, int sgid_index, int tclass, int hop_limit,
	uint32_t flow_label);
