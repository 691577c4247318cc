/*
 * regmany: 2000 regions, each on pages of its own, under a soft RLIMIT_NOFILE of
 * 1024 (TestVerbsRegMany). rdma_rxe's regions hold no file descriptor; xroce's hold
 * one each (a memfd per page range), which used to end registration at about the
 * 1017th with EMFILE and leave the application unable to open a file. They now sit
 * above the soft limit the application had, which the library raises to the hard
 * one. Prints "registered 2000, fopen ok, next descriptor below 1024", or "hard
 * limit too low" when the hard limit leaves no room (the test skips).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <infiniband/verbs.h>

enum { nregs = 2000 };

int main(void)
{
	struct rlimit rl;
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *c = l && l[0] ? ibv_open_device(l[0]) : NULL;
	struct ibv_pd *pd = c ? ibv_alloc_pd(c) : NULL;
	char *m = mmap(NULL, (size_t)nregs * 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	FILE *f;
	int i, fd;

	if (!pd || m == MAP_FAILED || getrlimit(RLIMIT_NOFILE, &rl))
		return perror("device, PD, memory or limit"), 2;
	if (rl.rlim_max < 1024 + nregs + 64)
		return printf("hard limit too low\n"), 0;
	rl.rlim_cur = 1024;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		return perror("setrlimit"), 2;
	for (i = 0; i < nregs; i++) /* every other page: no two regions share one */
		if (!ibv_reg_mr(pd, m + (size_t)i * 8192, 256, IBV_ACCESS_LOCAL_WRITE))
			return printf("registration %d: %s\n", i, strerror(errno)), 1;
	f = fopen("/proc/self/status", "r");
	fd = open("/dev/null", O_RDONLY);
	printf("registered %d, fopen %s, next descriptor %s 1024\n", i, f ? "ok" : strerror(errno), fd >= 0 && fd < 1024 ? "below" : "not below");
	return 0;
}
