/*
 * regprot: registrations keep the pages' protections and refuse what rdma_rxe's
 * ib_umem_get refuses: a read-only page registers for reading and stays
 * read-only; registered for local write it fails with EFAULT (FOLL_WRITE); a code
 * page registers and its function still runs; .rodata registers and reads the
 * same; an unmapped page, and NULL, fail with EFAULT; an access bit past the
 * optional range, or an iova at another page offset, with EINVAL; zero-based,
 * hugetlb and relaxed-ordering flags are taken. Prints "ok", or what differed.
 * TestVerbsRegProt runs it through xroce run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <infiniband/verbs.h>

static const char rodata[] = "read-only data of the program";

static int __attribute__((noinline)) twice(int x)
{
	return 2 * x;
}

/* perms returns the permission letters /proc/self/maps shows for address a. */
static const char *perms(const void *a)
{
	static char out[5];
	char line[512];
	unsigned long lo, hi;
	FILE *f = fopen("/proc/self/maps", "r");

	strcpy(out, "????");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, out) == 3 && lo <= (uintptr_t)a && (uintptr_t)a < hi)
			break;
	if (f)
		fclose(f);
	return out;
}

int main(void)
{
	struct ibv_device **devs = ibv_get_device_list(NULL);
	struct ibv_context *ctx = devs && devs[0] ? ibv_open_device(devs[0]) : NULL;
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	char *ro = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *gone = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr;
	int bad = 0;

	if (!pd || ro == MAP_FAILED || gone == MAP_FAILED) {
		printf("setup: %s\n", strerror(errno));
		return 1;
	}
	strcpy(ro, "before");
	mprotect(ro, 4096, PROT_READ);
	munmap(gone, 4096);

	errno = 0;
	if ((mr = ibv_reg_mr(pd, ro, 4096, IBV_ACCESS_LOCAL_WRITE)) || errno != EFAULT) {
		printf("read-only page for local write: %s, %s\n", mr ? "registered" : "refused", strerror(errno));
		bad = 1;
	}
	if (!(mr = ibv_reg_mr(pd, ro, 4096, 0))) {
		printf("read-only page: %s\n", strerror(errno));
		return 1;
	}
	if (perms(ro)[1] != '-' || strcmp(ro, "before")) {
		printf("read-only page registered: %s, holds %.8s\n", perms(ro), ro);
		bad = 1;
	}
	ibv_dereg_mr(mr);

	if (!(mr = ibv_reg_mr(pd, (void *)(uintptr_t)twice, 64, 0))) {
		printf("code page: %s\n", strerror(errno));
		return 1;
	}
	if (perms((void *)(uintptr_t)twice)[2] != 'x' || twice(21) != 42) {
		printf("code page registered: %s\n", perms((void *)(uintptr_t)twice));
		bad = 1;
	}
	ibv_dereg_mr(mr);

	if (!(mr = ibv_reg_mr(pd, (void *)rodata, sizeof(rodata), 0)) || strcmp(rodata, "read-only data of the program") ||
	    perms(rodata)[1] != '-') {
		printf(".rodata: %s, %s\n", mr ? "registered" : strerror(errno), perms(rodata));
		bad = 1;
	}
	if (mr)
		ibv_dereg_mr(mr);

	errno = 0;
	if ((mr = ibv_reg_mr(pd, gone, 4096, 0)) || errno != EFAULT) {
		printf("unmapped page: %s, %s\n", mr ? "registered" : "refused", strerror(errno));
		bad = 1;
	}
	/* the kernel's checks for rdma_rxe (ib_umem_get, ib_check_mr_access on Linux 6.1,
	 * ib_uverbs_reg_mr): NULL has no page (EFAULT); an access bit past the optional
	 * range, or an iova whose page offset is not the address's, is EINVAL; zero-based
	 * and hugetlb are taken (rxe registers the iova given) */
	errno = 0;
	if ((mr = ibv_reg_mr(pd, NULL, 64, 0)) || errno != EFAULT) {
		printf("NULL: %s, %s\n", mr ? "registered" : "refused", strerror(errno));
		bad = 1;
	}
	errno = 0;
	if ((mr = ibv_reg_mr(pd, ro, 64, 1 << 30)) || errno != EINVAL) {
		printf("access 1 << 30: %s, %s\n", mr ? "registered" : "refused", strerror(errno));
		bad = 1;
	}
	errno = 0;
	if ((mr = ibv_reg_mr_iova(pd, ro + 8, 64, 0x10000, 0)) || errno != EINVAL) {
		printf("iova at another page offset: %s, %s\n", mr ? "registered" : "refused", strerror(errno));
		bad = 1;
	}
	if (!(mr = ibv_reg_mr(pd, ro, 64, IBV_ACCESS_ZERO_BASED | IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING))) {
		printf("zero-based, hugetlb and relaxed ordering: %s\n", strerror(errno));
		bad = 1;
	} else {
		ibv_dereg_mr(mr);
	}
	if (!bad)
		printf("ok\n");
	return bad;
}
