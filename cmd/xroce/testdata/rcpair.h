/*
 * rcpair.h: what the verbs test programs that connect RC QPs of one context to each
 * other share: die, and connect_qp, which takes a QP from RESET to RTS towards
 * QPN dest at GID gid (the device's own), GID index 1, path MTU 1024, with
 * qp_access_flags access and max_rd_atomic = max_dest_rd_atomic = rd.
 */
#ifndef RCPAIR_H
#define RCPAIR_H
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

static int die(const char *what, int e)
{
	printf("%s: %s\n", what, strerror(e));
	exit(1);
}

static void connect_qp(struct ibv_qp *q, uint32_t dest, union ibv_gid *gid, int access, int rd)
{
	struct ibv_qp_attr m = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = access };
	int ret;

	if ((ret = ibv_modify_qp(q, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)))
		die("INIT", ret);
	memset(&m, 0, sizeof(m));
	m.qp_state = IBV_QPS_RTR;
	m.path_mtu = IBV_MTU_1024;
	m.dest_qp_num = dest;
	m.max_dest_rd_atomic = rd;
	m.min_rnr_timer = 12;
	m.ah_attr.is_global = 1;
	m.ah_attr.grh.dgid = *gid;
	m.ah_attr.grh.sgid_index = 1;
	m.ah_attr.grh.hop_limit = 64;
	m.ah_attr.port_num = 1;
	if ((ret = ibv_modify_qp(q, &m, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
		die("RTR", ret);
	memset(&m, 0, sizeof(m));
	m.qp_state = IBV_QPS_RTS;
	m.timeout = 14;
	m.retry_cnt = 7;
	m.rnr_retry = 7;
	m.max_rd_atomic = rd;
	if ((ret = ibv_modify_qp(q, &m, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)))
		die("RTS", ret);
}

#endif
