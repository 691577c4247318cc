/*
 * eintr: a signal ends a blocked ibv_get_cq_event and rdma_get_cm_event with -1
 * and errno EINTR, as libibverbs' and librdmacm's reads of their channels do (qperf
 * stops its tests with SIGALRM while blocked there). Prints one line per call.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

static void on_alarm(int sig) { (void)sig; }

int main(void)
{
	struct sigaction sa;
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq, *ecq;
	struct rdma_event_channel *ech;
	struct rdma_cm_event *ev;
	void *ectx;
	int n, ret;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm; /* no SA_RESTART */
	sigaction(SIGALRM, &sa, NULL);
	list = ibv_get_device_list(&n);
	if (!list || n < 1 || !(ctx = ibv_open_device(list[0])) || !(ch = ibv_create_comp_channel(ctx)) ||
	    !(cq = ibv_create_cq(ctx, 4, NULL, ch, 0)) || ibv_req_notify_cq(cq, 0)) {
		printf("setup failed\n");
		return 1;
	}
	alarm(1);
	ret = ibv_get_cq_event(ch, &ecq, &ectx);
	printf("ibv_get_cq_event %d %s\n", ret, ret ? strerror(errno) : "");
	if (!(ech = rdma_create_event_channel())) {
		printf("rdma_create_event_channel failed\n");
		return 1;
	}
	alarm(1);
	ret = rdma_get_cm_event(ech, &ev);
	printf("rdma_get_cm_event %d %s\n", ret, ret ? strerror(errno) : "");
	return 0;
}
