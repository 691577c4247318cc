/*
 * reglimit: registrations against RLIMIT_MEMLOCK, as rdma_rxe's ibv_reg_mr meets
 * it (ib_umem_get: ENOMEM beyond the limit without CAP_IPC_LOCK). Run with a 64 KiB
 * limit: 32 KiB registers; 64 KiB more then fails with ENOMEM ("limited") or
 * registers (argument "capable": the process has CAP_IPC_LOCK); after the first is
 * deregistered, 64 KiB registers either way. Prints "ok", or what differed.
 * TestVerbsRegMemlock runs it through xroce run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

int main(int argc, char **argv)
{
	int capable = argc > 1 && !strcmp(argv[1], "capable");
	struct ibv_device **devs = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *a, *b;
	char *buf = aligned_alloc(4096, 256 << 10);

	if (!devs || !devs[0] || !buf) {
		printf("no device or no memory\n");
		return 1;
	}
	ctx = ibv_open_device(devs[0]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd) {
		printf("open or alloc_pd: %s\n", strerror(errno));
		return 1;
	}
	a = ibv_reg_mr(pd, buf, 32 << 10, IBV_ACCESS_LOCAL_WRITE);
	if (!a) {
		printf("32 KiB: %s\n", strerror(errno));
		return 1;
	}
	errno = 0;
	b = ibv_reg_mr(pd, buf + (64 << 10), 64 << 10, IBV_ACCESS_LOCAL_WRITE);
	if (capable ? !b : b || errno != ENOMEM) {
		printf("64 KiB more: %s (%s)\n", b ? "registered" : "refused", strerror(errno));
		return 1;
	}
	if (b && ibv_dereg_mr(b)) {
		printf("dereg b\n");
		return 1;
	}
	if (ibv_dereg_mr(a)) {
		printf("dereg a\n");
		return 1;
	}
	b = ibv_reg_mr(pd, buf + (64 << 10), 64 << 10, IBV_ACCESS_LOCAL_WRITE);
	if (!b) {
		printf("64 KiB after dereg: %s\n", strerror(errno));
		return 1;
	}
	ibv_dereg_mr(b);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	printf("ok\n");
	return 0;
}
