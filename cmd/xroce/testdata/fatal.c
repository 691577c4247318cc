/*
 * fatal: the first asynchronous event after the device's daemon went away is
 * IBV_EVENT_DEVICE_FATAL, and the next call fails with EIO, as for a kernel device
 * that was removed. Prints "ready" once blocked-to-be, then one line per call.
 * Then it calls ibv_req_notify_cq and ibv_alloc_pd 1000 times each, as an
 * application retrying in a loop does (UCX), and prints how many failed and the
 * errno of the last: every one fails, and the library says the daemon went away
 * once, not a thousand times. Last, the objects made before go: each destroy
 * succeeds, as on a context disassociated from a removed device.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_async_event ev;
	struct ibv_cq *cq;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	static char buf[4096];
	int i, n, ret, failed, last;

	setvbuf(stdout, NULL, _IONBF, 0);
	list = ibv_get_device_list(&n);
	if (!list || n < 1 || !(ctx = ibv_open_device(list[0])) || !(cq = ibv_create_cq(ctx, 4, NULL, NULL, 0)) ||
	    !(pd = ibv_alloc_pd(ctx)) || !(mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE))) {
		printf("setup failed\n");
		return 1;
	}
	printf("ready\n");
	ret = ibv_get_async_event(ctx, &ev);
	if (ret == 0) {
		printf("event %s\n", ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
	} else {
		printf("ibv_get_async_event %d %s\n", ret, strerror(errno));
	}
	ret = ibv_get_async_event(ctx, &ev);
	printf("ibv_get_async_event %d %s\n", ret, ret ? strerror(errno) : "");
	for (i = failed = last = 0; i < 1000; i++)
		if ((ret = ibv_req_notify_cq(cq, 0))) {
			failed++;
			last = errno;
		}
	printf("ibv_req_notify_cq failed %d of 1000, errno %s\n", failed, strerror(last));
	for (i = failed = last = 0; i < 1000; i++)
		if (!ibv_alloc_pd(ctx)) {
			failed++;
			last = errno;
		}
	printf("ibv_alloc_pd failed %d of 1000, errno %s\n", failed, strerror(last));
	printf("ibv_dereg_mr %d\n", ibv_dereg_mr(mr));
	printf("ibv_dealloc_pd %d\n", ibv_dealloc_pd(pd));
	printf("ibv_destroy_cq %d\n", ibv_destroy_cq(cq));
	printf("ibv_close_device %d\n", ibv_close_device(ctx));
	return 0;
}
