/*
 * bindlo: rdma_bind_addr to a loopback address fails with ENODEV and no message,
 * as rdma_cm's does (lo has no RDMA device: cma_acquire_dev_by_src_ip);
 * libfabric's verbs provider binds 127.0.0.1 to probe. An address of no xroce
 * device still fails with EADDRNOTAVAIL and the library's hint. Prints one line a
 * bind: the address, the return value and errno. TestVerbsBindLoopback runs it
 * through xroce run.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <rdma/rdma_cma.h>

static void bind_one(struct rdma_event_channel *ch, const char *text)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *in = (void *)&ss;
	struct sockaddr_in6 *in6 = (void *)&ss;
	struct rdma_cm_id *id;
	int r;

	if (inet_pton(AF_INET, text, &in->sin_addr) == 1)
		in->sin_family = AF_INET;
	else if (inet_pton(AF_INET6, text, &in6->sin6_addr) == 1)
		in6->sin6_family = AF_INET6;
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		printf("%s: rdma_create_id: %s\n", text, strerror(errno));
		return;
	}
	fflush(stdout);
	errno = 0;
	r = rdma_bind_addr(id, (struct sockaddr *)&ss);
	printf("%s %d errno %d\n", text, r, r ? errno : 0);
	fflush(stdout);
	rdma_destroy_id(id);
}

int main(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();

	if (!ch) {
		printf("rdma_create_event_channel: %s\n", strerror(errno));
		return 1;
	}
	bind_one(ch, "127.0.0.1");
	bind_one(ch, "127.5.6.7");
	bind_one(ch, "::1");
	bind_one(ch, "::ffff:127.0.0.1");
	bind_one(ch, "192.0.2.1");
	rdma_destroy_event_channel(ch);
	return 0;
}
