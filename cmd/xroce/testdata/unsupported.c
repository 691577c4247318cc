/*
 * unsupported: asks twice each for a memory window and an on-demand-paging region,
 * which xroce does not have, and prints what verbs returned (NULL and errno
 * EOPNOTSUPP each time, as rdma-core's providers refuse what they lack), then
 * re-registers a region with bad flags and with new access flags, twice, and
 * resizes a CQ twice, and opens an XRC domain twice.
 * TestVerbsUnsupported builds it against libibverbs and runs it through xroce run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <infiniband/verbs.h>

int main(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	static char buf[4096];
	int i;

	if (!l || !l[0] || !(ctx = ibv_open_device(l[0])) || !(pd = ibv_alloc_pd(ctx))) {
		printf("no device or PD\n");
		return 1;
	}
	for (i = 0; i < 2; i++) {
		errno = 0;
		struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
		printf("alloc_mw %s errno %d\n", mw ? "ok" : "NULL", mw ? 0 : errno);
		errno = 0;
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
		printf("reg_mr odp %s errno %d\n", mr ? "ok" : "NULL", mr ? 0 : errno);
	}
	/* ibv_rereg_mr as libibverbs over rdma_rxe, which has none: a negative
	 * IBV_REREG_MR_ERR_* (it returned +EOPNOTSUPP, which a test for < 0 takes
	 * for success) */
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	errno = 0;
	i = mr ? ibv_rereg_mr(mr, 0x100, NULL, NULL, 0, 0) : 1;
	printf("rereg_mr bad flags %d errno %d\n", i, errno);
	for (int k = 0; k < 2; k++) {
		errno = 0;
		i = mr ? ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE) : 1;
		printf("rereg_mr access %d errno %d\n", i, errno);
	}
	if (mr)
		ibv_dereg_mr(mr);
	/* rdma_rxe resizes CQs; xroce does not, and says so once */
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	for (int k = 0; k < 2; k++)
		printf("resize_cq %d\n", cq ? ibv_resize_cq(cq, 64) : -1);
	if (cq)
		ibv_destroy_cq(cq);
	/* XRC: rdma_rxe has none; libibverbs answers NULL, EOPNOTSUPP */
	for (int k = 0; k < 2; k++) {
		struct ibv_xrcd_init_attr xa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, .fd = -1, .oflags = 0 };
		errno = 0;
		struct ibv_xrcd *x = ibv_open_xrcd(ctx, &xa);
		printf("open_xrcd %s errno %d\n", x ? "ok" : "NULL", x ? 0 : errno);
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(l);
	return 0;
}
