/*
 * regstack: registers a buffer on the calling thread's stack (a local array, as
 * rdma_rxe allows), checks that the thread's stack still holds its bytes and still
 * grows, forks a child that writes over that buffer and a registered heap buffer
 * (the parent must see neither write, as with rxe's pinned pages), then RDMA-WRITEs
 * the heap buffer into the stack buffer through a QP connected to itself (the
 * daemon must still see the stack pages), and forks again after deregistering
 * both. Prints "ok", or what differed.
 * TestVerbsRegStack runs it through xroce run.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <infiniband/verbs.h>

#define N 256

static int fill_check(const unsigned char *b, unsigned char seed, const char *what)
{
	int i;

	for (i = 0; i < N; i++)
		if (b[i] != (unsigned char)(seed + i)) {
			printf("%s: byte %d is %u, want %u\n", what, i, b[i], (unsigned char)(seed + i));
			return 1;
		}
	return 0;
}

/* deep uses about 1 MiB of stack (256 KiB on a thread): the main thread's stack
 * still grows. */
static long __attribute__((noinline)) deep(int n)
{
	volatile char pad[4096];

	pad[0] = 1;
	return n ? deep(n - 1) + pad[0] : 0;
}

/* child_writes forks a child that overwrites both buffers and exits; 0 when it
 * exited 0 and the parent's bytes are as before (dseed, sseed). */
static int child_writes(unsigned char *dst, unsigned char *src, unsigned char dseed, unsigned char sseed, const char *when)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		memset(dst, 0xcc, N);
		memset(src, 0xcc, N);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		printf("fork %s: the child did not exit 0\n", when);
		return 1;
	}
	return fill_check(dst, dseed, "the stack buffer after the child wrote its copy") ||
	       fill_check(src, sseed, "the heap buffer after the child wrote its copy");
}

static int gid_v4(struct ibv_context *ctx, union ibv_gid *gid)
{
	int i;

	for (i = 0; i < 16 && !ibv_query_gid(ctx, 1, i, gid); i++)
		if (gid->raw[10] == 0xff && gid->raw[11] == 0xff)
			return i;
	return -1;
}

static int connect_self(struct ibv_qp *qp, struct ibv_context *ctx)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	union ibv_gid gid;
	int idx = gid_v4(ctx, &gid);

	if (idx < 0 || ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return 1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = idx;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return 1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					     IBV_QP_MAX_QP_RD_ATOMIC) != 0;
}

static int run(int depth)
{
	unsigned char dst[N]; /* on this thread's stack */
	unsigned char *src = malloc(N);
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *smr, *dmr;
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 1, .max_recv_wr = 1,
								      .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;
	int i, n;

	if (!l || !l[0] || !src || !(ctx = ibv_open_device(l[0])) || !(pd = ibv_alloc_pd(ctx)) ||
	    !(cq = ibv_create_cq(ctx, 4, NULL, NULL, 0))) {
		printf("no device, PD or CQ\n");
		return 1;
	}
	for (i = 0; i < N; i++) {
		dst[i] = (unsigned char)(1 + i);
		src[i] = (unsigned char)(100 + i);
	}
	dmr = ibv_reg_mr(pd, dst, N, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	smr = ibv_reg_mr(pd, src, N, IBV_ACCESS_LOCAL_WRITE);
	if (!dmr || !smr) {
		printf("ibv_reg_mr: stack %p, heap %p: %m\n", (void *)dmr, (void *)smr);
		return 1;
	}
	if (fill_check(dst, 1, "the stack buffer after its registration"))
		return 1;
	if (deep(depth) != depth) {
		printf("the stack does not grow\n");
		return 1;
	}

	if (child_writes(dst, src, 1, 100, "while registered"))
		return 1;

	qa.send_cq = qa.recv_cq = cq;
	if (!(qp = ibv_create_qp(pd, &qa)) || connect_self(qp, ctx)) {
		printf("a QP connected to itself: %m\n");
		return 1;
	}
	sge = (struct ibv_sge){ .addr = (uintptr_t)src, .length = N, .lkey = smr->lkey };
	wr.wr.rdma.remote_addr = (uintptr_t)dst;
	wr.wr.rdma.rkey = dmr->rkey;
	if (ibv_post_send(qp, &wr, &bad)) {
		printf("ibv_post_send: %m\n");
		return 1;
	}
	for (i = 0; i < 50000 && !(n = ibv_poll_cq(cq, 1, &wc)); i++)
		usleep(100); /* 5 s at most */
	if (n != 1 || wc.status != IBV_WC_SUCCESS) {
		printf("RDMA WRITE into the stack buffer: %d completions, status %s\n", n, n == 1 ? ibv_wc_status_str(wc.status) : "-");
		return 1;
	}
	if (fill_check(dst, 100, "the stack buffer after the RDMA WRITE"))
		return 1;
	ibv_destroy_qp(qp);
	if (ibv_dereg_mr(dmr) || ibv_dereg_mr(smr) || fill_check(dst, 100, "the stack buffer after its deregistration") ||
	    child_writes(dst, src, 100, 100, "after deregistration"))
		return 1;
	return 0;
}

static void *run_thread(void *ret)
{
	*(int *)ret = run(64);
	return NULL;
}

/* regstack: on the main thread; regstack thread: on a thread with a 512 KiB stack. */
int main(int argc, char **argv)
{
	pthread_attr_t a;
	pthread_t t;
	int ret = 1;

	if (argc > 1 && !strcmp(argv[1], "thread")) {
		pthread_attr_init(&a);
		pthread_attr_setstacksize(&a, 512 << 10);
		if (pthread_create(&t, &a, run_thread, &ret) || pthread_join(t, NULL))
			return printf("pthread_create\n"), 1;
	} else
		ret = run(256);
	if (!ret)
		printf("ok\n");
	return ret;
}
