/*
 * regthreads: another thread keeps writing and checking 512 bytes on the same page
 * as a region that is registered and deregistered 200 times. Moving the pages
 * (copy, then remap) loses a write made in between; a region registered again on
 * pages a deregistered one left on their memfd takes that memfd back without a
 * copy, so none may be lost. Prints "ok", or how many were lost.
 * TestVerbsRegThreads runs it through xroce run.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

static volatile unsigned long *other;
static volatile int stop, started;
static volatile long lost, rounds;

static void *writer(void *arg)
{
	unsigned long v = 0;
	int i;

	(void)arg;
	while (!stop) {
		v++;
		for (i = 0; i < 64; i++)
			other[i] = v;
		for (i = 0; i < 64; i++)
			if (other[i] != v) {
				lost++;
				break;
			}
		rounds++;
		started = 1;
	}
	return NULL;
}

int main(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	char *page = aligned_alloc(4096, 4096);
	pthread_t t;
	int i;

	if (!l || !l[0] || !page || !(ctx = ibv_open_device(l[0])) || !(pd = ibv_alloc_pd(ctx))) {
		printf("no device or PD\n");
		return 1;
	}
	memset(page, 0, 4096);
	other = (volatile unsigned long *)(page + 2048); /* the same page, outside the region */
	if (!(mr = ibv_reg_mr(pd, page, 1024, IBV_ACCESS_LOCAL_WRITE)) || ibv_dereg_mr(mr)) {
		printf("first registration failed\n");
		return 1;
	}
	pthread_create(&t, NULL, writer, NULL);
	while (!started)
		;
	for (i = 0; i < 200; i++) {
		if (!(mr = ibv_reg_mr(pd, page, 1024, IBV_ACCESS_LOCAL_WRITE)) || ibv_dereg_mr(mr)) {
			printf("registration %d failed\n", i);
			return 1;
		}
	}
	stop = 1;
	pthread_join(t, NULL);
	if (lost) {
		printf("%ld of %ld writes lost\n", lost, rounds);
		return 1;
	}
	printf("ok\n");
	return 0;
}
