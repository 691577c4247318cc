/*
 * regoverlap: registers regions whose pages partly overlap (two buffers of one
 * block sharing a boundary page, then the whole block), checks the application's
 * bytes survive every registration and deregistration, and prints "ok".
 * TestVerbsRegOverlap builds it against libibverbs and runs it through xroce run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

static int check(const unsigned char *b, size_t n, const char *when)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i] != (unsigned char)(i * 7)) {
			printf("byte %zu changed %s: %u\n", i, when, b[i]);
			return 1;
		}
	return 0;
}

int main(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *a, *b, *all;
	size_t n = 3 * 4096, i;
	unsigned char *blk = aligned_alloc(4096, n);

	if (!l || !l[0] || !blk || !(ctx = ibv_open_device(l[0])) || !(pd = ibv_alloc_pd(ctx))) {
		printf("no device or PD\n");
		return 1;
	}
	for (i = 0; i < n; i++)
		blk[i] = (unsigned char)(i * 7);
	a = ibv_reg_mr(pd, blk + 100, 5000, IBV_ACCESS_LOCAL_WRITE);                      /* pages 0-1 */
	b = ibv_reg_mr(pd, blk + 6000, 5000, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE); /* pages 1-2 */
	all = ibv_reg_mr(pd, blk, n, IBV_ACCESS_LOCAL_WRITE);                              /* all three */
	if (!a || !b || !all) {
		printf("reg: %p %p %p\n", (void *)a, (void *)b, (void *)all);
		return 1;
	}
	if (a->lkey == b->lkey || b->lkey == all->lkey || a->addr != blk + 100 || b->length != 5000)
		return printf("keys %x %x %x\n", a->lkey, b->lkey, all->lkey), 1;
	if (check(blk, n, "by registration"))
		return 1;
	if (ibv_dereg_mr(b) || ibv_dereg_mr(a) || ibv_dereg_mr(all) || check(blk, n, "by deregistration"))
		return printf("dereg\n"), 1;
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(l);
	printf("ok\n");
	return 0;
}
