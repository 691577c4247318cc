/*
 * regrace: ibv_reg_mr moves a region's pages onto memory the daemon shares
 * (docs/verbs-library.md, "Memory regions") while another thread keeps writing
 * those pages, as a progress thread writes the heap objects that share a page with
 * a buffer. rdma_rxe pins pages in place, so no write can be lost; the move must
 * not lose one either (TestVerbsRegRace). The writer bumps a counter on each of
 * 2000 pages in turn and checks that each reads back its own last value, while
 * the main thread registers (and deregisters) 64 bytes on every other page.
 * Prints "registrations 1000 lost writes 0" and exits 0, or the lost count and 1.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#include <infiniband/verbs.h>

enum { npages = 2000 };

static volatile uint64_t *ctr[npages];
static volatile int stop;
static volatile long lost, rounds;

static void *writer(void *arg)
{
	uint64_t last[npages] = { 0 };

	(void)arg;
	while (!stop) {
		for (int i = 0; i < npages; i++) {
			uint64_t v = *ctr[i];

			lost += v != last[i];
			last[i] = v + 1;
			*ctr[i] = v + 1;
		}
		rounds++;
	}
	return NULL;
}

int main(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *c = l && l[0] ? ibv_open_device(l[0]) : NULL;
	struct ibv_pd *pd = c ? ibv_alloc_pd(c) : NULL;
	char *m = mmap(NULL, (size_t)npages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	pthread_t t;
	int regs = 0;

	if (!pd || m == MAP_FAILED)
		return perror("device, PD or memory"), 2;
	for (int i = 0; i < npages; i++)
		ctr[i] = (volatile uint64_t *)(m + (size_t)i * 4096);
	pthread_create(&t, NULL, writer, NULL);
	while (!rounds)
		usleep(100);
	for (int i = 0; i < npages; i += 2, regs++) {
		struct ibv_mr *mr = ibv_reg_mr(pd, m + (size_t)i * 4096 + 2048, 64, IBV_ACCESS_LOCAL_WRITE);

		if (!mr || ibv_dereg_mr(mr))
			return perror("ibv_reg_mr"), 2;
	}
	for (long r = rounds; rounds < r + 2;) /* the writer checks every page again */
		usleep(100);
	stop = 1;
	pthread_join(t, NULL);
	printf("registrations %d lost writes %ld\n", regs, lost);
	return lost != 0;
}
