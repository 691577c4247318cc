/*
 * cmunsup: librdmacm functions xroce does not implement fail with ENOSYS instead
 * of reaching the real librdmacm with xroce's objects (where mckey and rstream
 * crashed): rdma_join_multicast on a UDP id, rdma_create_srq, rdma_set_local_ece,
 * rsocket. Prints one line each: the call, its return value and errno.
 * TestVerbsCMUnsupported runs it through xroce run.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

int main(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct sockaddr_in mc = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0xEF010203) };
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_ece ece = { 0 };
	int r;

	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_UDP)) {
		printf("setup: %s\n", strerror(errno));
		return 1;
	}
	errno = 0;
	r = rdma_join_multicast(id, (struct sockaddr *)&mc, NULL);
	printf("rdma_join_multicast %d errno %d\n", r, errno);
	errno = 0;
	r = rdma_create_srq(id, NULL, &sa);
	printf("rdma_create_srq %d errno %d\n", r, errno);
	errno = 0;
	r = rdma_set_local_ece(id, &ece);
	printf("rdma_set_local_ece %d errno %d\n", r, errno);
	errno = 0;
	r = rsocket(AF_INET, SOCK_STREAM, 0);
	printf("rsocket %d errno %d\n", r, errno);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}
