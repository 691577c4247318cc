/*
 * libxroce's private header: what libxroce.c (devices, objects, the control
 * socket) and rings.c (posting and polling on the shared-memory rings) share.
 */
#ifndef LIBXROCE_H
#define LIBXROCE_H

#define _GNU_SOURCE
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "xroce_proto.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the control protocol is little-endian and this file copies it as it is"
#endif

/* verbs.h turns these names into inline wrappers; here they are the functions. */
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define XROCE_EXPORT __attribute__((visibility("default")))
#define XDEV_MAGIC 0x78646576u /* "xdev" */
#define XCTX_MAGIC 0x78637478u /* "xctx" */
#define DEFAULT_RUN_DIR "/run/xroce"
#define DEFAULT_TIMEOUT_MS 5000
#define QP_BUCKETS 64

/* xdev is one device a daemon serves. Devices live until the process exits: an
 * application may keep using context->device after ibv_free_device_list. */
struct xdev {
	struct ibv_device dev; /* first: the ibv_device pointer is the xdev pointer */
	uint32_t magic;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uint64_t guid;
	char ifname[16];       /* the interface the daemon serves */
	int netns;             /* the daemon's network namespace: 0 this process's, 1 unknown, 2 another */
	struct xdev *next;
};

/* xctx is an open device: one control-socket session. */
struct xctx {
	uint32_t magic;
	int fd;
	uint32_t seq;
	pthread_mutex_t lock;
	struct xdev *xd;
	pthread_mutex_t objs; /* guards cqs, qps and srqs */
	struct xcq *cqs;      /* this context's CQs, to check completion-channel cookies */
	struct xqp *qps[QP_BUCKETS]; /* this context's QPs by qp_num, for polling */
	struct xsrq *srqs;           /* this context's SRQs, to check event cookies */
	int gone;                    /* the daemon hung up (said once) */
	int fatal;                   /* IBV_EVENT_DEVICE_FATAL was returned */
	struct verbs_context vctx; /* vctx.context is what the application holds */
};

struct xcq {
	union {
		struct ibv_cq cq;       /* first: the ibv_cq pointer is the xcq pointer */
		struct ibv_cq_ex cqx;   /* ibv_cq_ex begins with ibv_cq's fields (verbs.h) */
	};
	struct xcq *next;
	/* the completion ring (rings.c): the daemon produces, x_poll_cq consumes */
	pthread_spinlock_t lock;
	unsigned char *ring;
	size_t ring_size;
	uint32_t entries;
	uint32_t cons; /* published at XROCE_CQ_RING_CONS */
	uint32_t idle; /* empty polls, to look for a dead daemon now and then */
	struct ibv_wc cur; /* ibv_start_poll/ibv_next_poll's current completion */
	uint32_t prod;     /* the producer index ibv_start_poll read */
};

/* xsrq is a shared receive queue (srq.c): the daemon's SRQ and the wr_id of each
 * slot a posted receive holds until its completion is polled. */
struct xsrq {
	struct ibv_srq srq; /* first: the ibv_srq pointer is the xsrq pointer */
	pthread_mutex_t lock; /* guards the table */
	uint64_t *wrid;       /* by slot */
	uint32_t *free;       /* the free slots, a stack */
	uint32_t nfree, cap;
	uint32_t max_sge;
	struct xsrq *next;    /* in the context's srqs */
};

struct xchan {
	struct ibv_comp_channel ch;
	uint32_t h;
};

struct xqp {
	union {
		struct ibv_qp qp;       /* ibv_qp_ex begins with its ibv_qp */
		struct ibv_qp_ex qpx;   /* for QPs made by create_qp_ex with send_ops_flags */
	};
	struct ibv_qp_cap cap;
	int sq_sig_all;
	int ex;             /* qpx is valid: ibv_qp_to_qp_ex returns it */
	uint64_t send_ops;  /* IBV_QP_EX_WITH_* the QP was created with */
	/* The ibv_wr_* batch between wr_start and wr_complete: records of
	 * xroce_send_wr + SGEs or inline data, as a POST_SEND message carries them. */
	unsigned char *wbuf;
	size_t wlen, wcap;
	size_t wcur;                /* offset of the open WR's record, or WR_NONE */
	struct xroce_send_wr wm;    /* the open WR, written to wbuf + wcur when closed */
	int wdata;                  /* the open WR has its data (SGEs or inline) */
	uint32_t wn;
	int werr;                   /* first error of the batch: wr_complete returns it */
	/* the send and receive rings (rings.c). A slot is free again when the CQE
	 * naming its sequence number is polled: head is past it. */
	unsigned char *ring; /* the memfd's mapping: header, send ring, receive ring */
	size_t ring_size;
	int db;              /* the doorbell eventfd */
	pthread_spinlock_t sq_lock, rq_lock;
	unsigned char *sq, *rq;
	uint32_t sq_entries, sq_stride, rq_entries, rq_stride;
	uint32_t sq_tail, rq_tail; /* written under the locks, published in the header */
	uint32_t sq_head, rq_head; /* advanced by x_poll_cq (atomics) */
	uint64_t *sq_wrid, *rq_wrid; /* the application's wr_id of each slot */
	struct xqp *hnext;   /* in the context's qps bucket */
};
#define WR_NONE ((size_t)-1)


/* libxroce.c */
struct xctx *ctx_of(struct ibv_context *c);
int hung_up(int fd);
int destroy_failed(struct xctx *xc, int ret);
int ctx_call(struct xctx *xc, uint16_t op, const void *req, size_t reqlen, void *out, size_t outlen);
int ctx_call_fds(struct xctx *xc, uint16_t op, const void *req, size_t reqlen, const int *sendfds, int nsend,
		 void *out, size_t outlen, int *recvfds, int nrecv);
void warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void unsupported(int *said, const char *what);
size_t put_sges(unsigned char *buf, size_t len, const struct ibv_sge *sg, int n);
void qp_attr_from(struct ibv_qp_attr *attr, const struct xroce_qp_attr *m);

/* srq.c */
uint64_t srq_wr_id(struct ibv_srq *srq, uint32_t slot);
int x_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int inline_op(enum ibv_wr_opcode op);
size_t put_sges(unsigned char *buf, size_t len, const struct ibv_sge *sg, int n);

/* segs.c */
struct seg;
int segs_cover(uintptr_t s, uintptr_t e, int writable, struct seg **gs, int *n, struct xroce_mr_piece *pc);

/* memlock.c: RLIMIT_MEMLOCK as ib_umem_get charges it (ENOMEM beyond it without
 * CAP_IPC_LOCK); uncharge on deregistration. */
int memlock_charge(uint64_t npages);
void memlock_uncharge(uint64_t npages);
void seg_put(struct seg *g);
/* wprotect.c: other threads' writes wait while a registration moves pages. */
int wp_begin(uintptr_t s, size_t len);
void wp_end(uintptr_t s, size_t len, int moved);
int seg_fd(const struct seg *g);

/* rings.c */
int x_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
void cq_ex_ops(struct ibv_cq_ex *cq);
int x_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int x_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int sq_post_records(struct xqp *q, const unsigned char *recs, uint32_t n);
int map_ring(int fd, uint64_t size, uint64_t need, uint32_t entries, unsigned char **ring);
int qp_rings(struct xqp *q, const struct xroce_create_qp_reply *r, int fd);
void qp_rings_free(struct xqp *q);
void rings_reset(struct xqp *q);
int ud_ah_ok(const struct xqp *q, const struct ibv_ah *ah);
void qp_table_add(struct xctx *xc, struct xqp *q);
void qp_table_del(struct xctx *xc, struct xqp *q);

#endif
