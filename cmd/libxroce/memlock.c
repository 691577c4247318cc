/* Locked-memory accounting of registrations, as rdma_rxe's ibv_reg_mr meets it:
 * ib_umem_get pins a region's pages and charges them to the process's
 * RLIMIT_MEMLOCK unless it has CAP_IPC_LOCK, failing with ENOMEM beyond the limit
 * (drivers/infiniband/core/umem.c, mm->pinned_vm). The library keeps the same
 * count, so an application under a small `ulimit -l` fails where it would on
 * rxe, not later. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <sys/resource.h>

#include "libxroce.h"

static uint64_t pinned_pages; /* the process's registered pages (each region's span) */

/* cap_ipc_lock says whether the process has CAP_IPC_LOCK in its effective set
 * (/proc/self/status CapEff; bit 14, linux/capability.h). */
static int cap_ipc_lock(void)
{
	char line[256];
	unsigned long long eff = 0;
	int found = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1) {
			found = 1;
			break;
		}
	fclose(f);
	return found && (eff >> 14) & 1;
}

int memlock_charge(uint64_t npages)
{
	struct rlimit rl;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t now = __atomic_add_fetch(&pinned_pages, npages, __ATOMIC_RELAXED);

	if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY || now <= rl.rlim_cur / page || cap_ipc_lock())
		return 0;
	__atomic_sub_fetch(&pinned_pages, npages, __ATOMIC_RELAXED);
	return ENOMEM;
}

void memlock_uncharge(uint64_t npages)
{
	__atomic_sub_fetch(&pinned_pages, npages, __ATOMIC_RELAXED);
}
