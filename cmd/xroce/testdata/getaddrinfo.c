/*
 * getaddrinfo: rdma_getaddrinfo as librdmacm's (librdmacm/addrinfo.c), through
 * xroce run. Prints one line each, then "ok" (TestVerbsGetaddrinfo):
 *   - no node, no service, no hints: -1, EINVAL;
 *   - no node, no service: the hints' source and destination, copied;
 *   - a node and a service with a source in the hints (ucmatose -b): the node's
 *     address and port as destination, the hints' source kept (it was dropped).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <rdma/rdma_cma.h>

static const char *addr(struct sockaddr *sa, socklen_t len)
{
	static char b[4][64];
	static int i;
	struct sockaddr_in *in = (struct sockaddr_in *)sa;
	char *s = b[i++ % 4];

	if (!sa || len != sizeof(*in))
		return "none";
	snprintf(s, 64, "%s:%u", inet_ntoa(in->sin_addr), ntohs(in->sin_port));
	return s;
}

int main(void)
{
	struct sockaddr_in src = { .sin_family = AF_INET }, dst = { .sin_family = AF_INET, .sin_port = htons(7) };
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	int r;

	inet_pton(AF_INET, "10.1.2.3", &src.sin_addr);
	inet_pton(AF_INET, "10.4.5.6", &dst.sin_addr);
	errno = 0;
	r = rdma_getaddrinfo(NULL, NULL, NULL, &res);
	printf("no node, service or hints: %d errno %d\n", r, errno);

	hints.ai_src_addr = (struct sockaddr *)&src;
	hints.ai_src_len = sizeof(src);
	hints.ai_dst_addr = (struct sockaddr *)&dst;
	hints.ai_dst_len = sizeof(dst);
	if ((r = rdma_getaddrinfo(NULL, NULL, &hints, &res)))
		return printf("hints alone: %d errno %d\n", r, errno), 1;
	printf("hints alone: src %s dst %s\n", addr(res->ai_src_addr, res->ai_src_len), addr(res->ai_dst_addr, res->ai_dst_len));
	rdma_freeaddrinfo(res);

	hints.ai_dst_addr = NULL;
	hints.ai_dst_len = 0;
	if ((r = rdma_getaddrinfo("10.7.8.9", "7174", &hints, &res)))
		return printf("node and service: %d errno %d\n", r, errno), 1;
	printf("node and service: src %s dst %s\n", addr(res->ai_src_addr, res->ai_src_len), addr(res->ai_dst_addr, res->ai_dst_len));
	rdma_freeaddrinfo(res);
	printf("ok\n");
	return 0;
}
