/*
 * fatal: the first asynchronous event after the device's daemon went away is
 * IBV_EVENT_DEVICE_FATAL, and the next call fails with EIO, as for a kernel device
 * that was removed. Prints "ready" once blocked-to-be, then one line per call.
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
	int n, ret;

	setvbuf(stdout, NULL, _IONBF, 0);
	list = ibv_get_device_list(&n);
	if (!list || n < 1 || !(ctx = ibv_open_device(list[0]))) {
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
	return 0;
}
