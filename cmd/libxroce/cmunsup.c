/* librdmacm's functions that xroce does not implement yet: multicast, the RDMA
 * CM's SRQ helpers, ECE and rsockets. Each fails with ENOSYS and says so once:
 * left to the real librdmacm they would follow pointers inside xroce's objects
 * (rstream and mckey crashed there). Symbol versions as rdma-core's
 * librdmacm/librdmacm.map (libxroce.map). */
#include <errno.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <poll.h>
#include <err.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "libxroce.h"

/* nosys fails the call with ENOSYS, saying once per area what is missing. */
static void nosys(int *said, const char *what)
{
	if (!__atomic_exchange_n(said, 1, __ATOMIC_RELAXED))
		warnx("xroce does not support %s yet: it fails with ENOSYS (the README's \"Unmodified applications\" lists what runs)", what);
	errno = ENOSYS;
}

static int said_mcast, said_srq, said_ece, said_rs;

#define MCAST "multicast (rdma_join_multicast, rdma_leave_multicast)"
#define CMSRQ "the RDMA CM's SRQ helpers (rdma_create_srq): use ibv_create_srq and rdma_create_qp with attr.srq"
#define ECE "enhanced connection establishment (rdma_set_local_ece, rdma_get_remote_ece, rdma_reject_ece)"
#define RS "rsockets (rsocket, rconnect, ...: librdmacm's sockets over RDMA)"

#define NOSYS(said, what, ret, name, ...)        \
	XROCE_EXPORT ret name(__VA_ARGS__)         \
	{                                          \
		nosys(&said, what);                \
		return -1;                         \
	}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"

NOSYS(said_mcast, MCAST, int, rdma_join_multicast, struct rdma_cm_id *id, struct sockaddr *addr, void *context)
NOSYS(said_mcast, MCAST, int, rdma_join_multicast_ex, struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *mc_join_attr, void *context)
NOSYS(said_mcast, MCAST, int, rdma_leave_multicast, struct rdma_cm_id *id, struct sockaddr *addr)
NOSYS(said_srq, CMSRQ, int, rdma_create_srq, struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
NOSYS(said_srq, CMSRQ, int, rdma_create_srq_ex, struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
NOSYS(said_ece, ECE, int, rdma_set_local_ece, struct rdma_cm_id *id, struct ibv_ece *ece)
NOSYS(said_ece, ECE, int, rdma_get_remote_ece, struct rdma_cm_id *id, struct ibv_ece *ece)
NOSYS(said_ece, ECE, int, rdma_reject_ece, struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)

XROCE_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	/* rdma_create_srq never made one */
}

NOSYS(said_rs, RS, int, rsocket, int domain, int type, int protocol)
NOSYS(said_rs, RS, int, rbind, int socket, const struct sockaddr *addr, socklen_t addrlen)
NOSYS(said_rs, RS, int, rlisten, int socket, int backlog)
NOSYS(said_rs, RS, int, raccept, int socket, struct sockaddr *addr, socklen_t *addrlen)
NOSYS(said_rs, RS, int, rconnect, int socket, const struct sockaddr *addr, socklen_t addrlen)
NOSYS(said_rs, RS, int, rshutdown, int socket, int how)
NOSYS(said_rs, RS, int, rclose, int socket)
NOSYS(said_rs, RS, ssize_t, rrecv, int socket, void *buf, size_t len, int flags)
NOSYS(said_rs, RS, ssize_t, rrecvfrom, int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr, socklen_t *addrlen)
NOSYS(said_rs, RS, ssize_t, rrecvmsg, int socket, struct msghdr *msg, int flags)
NOSYS(said_rs, RS, ssize_t, rsend, int socket, const void *buf, size_t len, int flags)
NOSYS(said_rs, RS, ssize_t, rsendto, int socket, const void *buf, size_t len, int flags, const struct sockaddr *dest_addr, socklen_t addrlen)
NOSYS(said_rs, RS, ssize_t, rsendmsg, int socket, const struct msghdr *msg, int flags)
NOSYS(said_rs, RS, ssize_t, rread, int socket, void *buf, size_t count)
NOSYS(said_rs, RS, ssize_t, rreadv, int socket, const struct iovec *iov, int iovcnt)
NOSYS(said_rs, RS, ssize_t, rwrite, int socket, const void *buf, size_t count)
NOSYS(said_rs, RS, ssize_t, rwritev, int socket, const struct iovec *iov, int iovcnt)
NOSYS(said_rs, RS, int, rpoll, struct pollfd *fds, nfds_t nfds, int timeout)
NOSYS(said_rs, RS, int, rselect, int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
NOSYS(said_rs, RS, int, rgetpeername, int socket, struct sockaddr *addr, socklen_t *addrlen)
NOSYS(said_rs, RS, int, rgetsockname, int socket, struct sockaddr *addr, socklen_t *addrlen)
NOSYS(said_rs, RS, int, rsetsockopt, int socket, int level, int optname, const void *optval, socklen_t optlen)
NOSYS(said_rs, RS, int, rgetsockopt, int socket, int level, int optname, void *optval, socklen_t *optlen)
NOSYS(said_rs, RS, off_t, riomap, int socket, void *buf, size_t len, int prot, int flags, off_t offset)
NOSYS(said_rs, RS, int, riounmap, int socket, void *buf, size_t len)
NOSYS(said_rs, RS, size_t, riowrite, int socket, const void *buf, size_t count, off_t offset, int flags)

XROCE_EXPORT int rfcntl(int socket, int cmd, ...)
{
	nosys(&said_rs, RS);
	return -1;
}

#pragma GCC diagnostic pop
