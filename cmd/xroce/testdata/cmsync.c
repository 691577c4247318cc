/*
 * cmsync: librdmacm's synchronous ids (rdma_create_ep with no event channel), as
 * rdmacm-utils' rdma_server and rdma_client use them, checked at each step.
 *
 *   cmsync server ADDR PORT   takes two connection requests (rdma_get_request
 *                             twice), accepts them in reverse order, receives
 *                             "ping K" on each and answers "pong K"
 *   cmsync client ADDR PORT K connects, sends "ping K", expects "pong K"
 *   cmsync refused ADDR PORT  connects where nothing listens, then asks the id
 *                             (not listening) for a request
 *   cmsync migrate ADDR PORT  connects on an event channel, leaves the
 *                             ESTABLISHED event unread, migrates the id to a new
 *                             channel and reads it there (then disconnects)
 *
 * Each step prints one line; any failure prints why and exits 1.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#define MSG 64

static int die(const char *what)
{
	printf("%s failed: %s\n", what, strerror(errno));
	exit(1);
}

static void check(int ok, const char *what)
{
	if (!ok) {
		printf("check failed: %s\n", what);
		exit(1);
	}
}

static struct rdma_addrinfo *lookup(const char *addr, const char *port, int passive)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;

	if (passive)
		hints.ai_flags = RAI_PASSIVE;
	if (rdma_getaddrinfo(addr, port, &hints, &res))
		die("rdma_getaddrinfo");
	return res;
}

static void caps(struct ibv_qp_init_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->cap.max_send_wr = a->cap.max_recv_wr = 2;
	a->cap.max_send_sge = a->cap.max_recv_sge = 1;
	a->sq_sig_all = 1;
}

/* wc_ok waits for one completion of cq kind (send or receive) and checks it. */
static void wc_ok(struct rdma_cm_id *id, int recv, uint32_t len)
{
	struct ibv_wc wc;
	int n;

	while ((n = recv ? rdma_get_recv_comp(id, &wc) : rdma_get_send_comp(id, &wc)) == 0)
		;
	if (n < 0)
		die(recv ? "rdma_get_recv_comp" : "rdma_get_send_comp");
	if (wc.status != IBV_WC_SUCCESS || (recv && wc.byte_len != len)) {
		printf("%s completion: status %s, %u bytes\n", recv ? "receive" : "send", ibv_wc_status_str(wc.status),
		       wc.byte_len);
		exit(1);
	}
}

static void disconnect(struct rdma_cm_id *id, const char *who)
{
	if (rdma_disconnect(id))
		die("rdma_disconnect");
	printf("%s: disconnected, %s\n", who, rdma_event_str(id->event->event));
}

static void server(const char *addr, const char *port)
{
	struct rdma_addrinfo *res = lookup(addr, port, 1);
	struct rdma_cm_id *listen, *id[2];
	struct ibv_qp_init_attr a;
	static char buf[2][MSG], reply[MSG];
	struct ibv_mr *mr[2], *rmr;
	int i;

	caps(&a);
	if (rdma_create_ep(&listen, res, NULL, &a))
		die("rdma_create_ep");
	rdma_freeaddrinfo(res);
	check(listen->channel != NULL && listen->pd != NULL, "a passive endpoint has a channel and its device's PD");
	if (rdma_listen(listen, 2))
		die("rdma_listen");
	printf("server: listening\n");
	fflush(stdout);
	for (i = 0; i < 2; i++) {
		if (rdma_get_request(listen, &id[i]))
			die("rdma_get_request");
		check(id[i]->event && id[i]->event->event == RDMA_CM_EVENT_CONNECT_REQUEST, "the request's id holds its event");
		check(id[i]->qp && id[i]->send_cq && id[i]->recv_cq && id[i]->recv_cq_channel,
		      "rdma_get_request made the QP and its CQs");
		check(id[i]->channel != listen->channel && (i == 0 || id[i]->channel != id[0]->channel),
		      "each request has its own channel");
		if (!(mr[i] = rdma_reg_msgs(id[i], buf[i], MSG)) || rdma_post_recv(id[i], NULL, buf[i], MSG, mr[i]))
			die("receive");
	}
	printf("server: two requests\n");
	for (i = 1; i >= 0; i--) { /* the second first: each accept waits on its own id's channel */
		if (rdma_accept(id[i], NULL))
			die("rdma_accept");
		check(id[i]->event->event == RDMA_CM_EVENT_ESTABLISHED, "rdma_accept returns at ESTABLISHED");
	}
	for (i = 1; i >= 0; i--) {
		wc_ok(id[i], 1, 7);
		check(!strncmp(buf[i], "ping ", 5), "a ping");
		snprintf(reply, sizeof(reply), "pong %c", buf[i][5]);
		if (!(rmr = rdma_reg_msgs(id[i], reply, MSG)) || rdma_post_send(id[i], NULL, reply, 7, rmr, 0))
			die("send");
		wc_ok(id[i], 0, 0);
		printf("server: %.6s answered\n", buf[i]);
		fflush(stdout);
		disconnect(id[i], "server");
		rdma_dereg_mr(rmr);
		rdma_dereg_mr(mr[i]);
		rdma_destroy_ep(id[i]);
	}
	rdma_destroy_ep(listen);
}

static void client(const char *addr, const char *port, const char *k)
{
	struct rdma_addrinfo *res = lookup(addr, port, 0);
	struct rdma_cm_id *id;
	struct ibv_qp_init_attr a;
	static char msg[MSG], buf[MSG];
	char want[MSG];
	struct ibv_mr *mr, *smr;

	caps(&a);
	if (rdma_create_ep(&id, res, NULL, &a))
		die("rdma_create_ep");
	rdma_freeaddrinfo(res);
	check(id->qp && id->pd && id->send_cq && id->recv_cq && id->send_cq_channel, "rdma_create_ep made the QP and its CQs");
	check(id->event && id->event->event == RDMA_CM_EVENT_ROUTE_RESOLVED, "the last event is ROUTE_RESOLVED");
	if (!(mr = rdma_reg_msgs(id, buf, MSG)) || rdma_post_recv(id, NULL, buf, MSG, mr))
		die("receive");
	if (rdma_connect(id, NULL))
		die("rdma_connect");
	check(id->event->event == RDMA_CM_EVENT_ESTABLISHED, "rdma_connect returns at ESTABLISHED");
	snprintf(msg, sizeof(msg), "ping %s", k);
	if (!(smr = rdma_reg_msgs(id, msg, MSG)) || rdma_post_send(id, NULL, msg, 7, smr, 0))
		die("send");
	wc_ok(id, 0, 0);
	wc_ok(id, 1, 7);
	snprintf(want, sizeof(want), "pong %s", k);
	check(!strncmp(buf, want, 7), "the pong");
	printf("client %s: %.6s\n", k, buf);
	disconnect(id, "client");
	rdma_dereg_mr(smr);
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
}

static void refused(const char *addr, const char *port)
{
	struct rdma_addrinfo *res = lookup(addr, port, 0);
	struct rdma_cm_id *id;
	struct ibv_qp_init_attr a;
	int ret;

	caps(&a);
	if (rdma_create_ep(&id, res, NULL, &a))
		die("rdma_create_ep");
	rdma_freeaddrinfo(res);
	struct rdma_cm_id *req;

	ret = rdma_connect(id, NULL);
	printf("rdma_connect %d %s, %s status %d\n", ret, strerror(errno), rdma_event_str(id->event->event),
	       id->event->status);
	ret = rdma_get_request(id, &req); /* not listening: an error, not a wait for ever */
	printf("rdma_get_request %d %s\n", ret, strerror(errno));
	rdma_destroy_ep(id);
}

/* next_event waits up to 5 s for an event on ch and returns its type, or -1. */
static int next_event(struct rdma_event_channel *ch)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;
	int t;

	if (poll(&p, 1, 5000) != 1 || rdma_get_cm_event(ch, &e))
		return -1;
	t = e->event;
	rdma_ack_cm_event(e);
	return t;
}

static void migrate(const char *addr, const char *port)
{
	struct rdma_addrinfo *res = lookup(addr, port, 0);
	struct rdma_event_channel *ch = rdma_create_event_channel(), *ch2 = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct ibv_qp_init_attr a;
	int t;

	if (!ch || !ch2 || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, NULL, res->ai_dst_addr, 2000) || next_event(ch) != RDMA_CM_EVENT_ADDR_RESOLVED ||
	    rdma_resolve_route(id, 2000) || next_event(ch) != RDMA_CM_EVENT_ROUTE_RESOLVED)
		die("resolving");
	caps(&a);
	a.qp_type = IBV_QPT_RC;
	if (rdma_create_qp(id, NULL, &a) || rdma_connect(id, NULL))
		die("rdma_connect");
	usleep(500000); /* the ESTABLISHED event comes, and waits on ch */
	if (rdma_migrate_id(id, ch2))
		die("rdma_migrate_id");
	t = next_event(ch2);
	printf("after the migration: %s on the new channel\n", t < 0 ? "nothing" : rdma_event_str(t));
	if (rdma_disconnect(id))
		die("rdma_disconnect");
	t = next_event(ch2);
	printf("after the disconnect: %s\n", t < 0 ? "nothing" : rdma_event_str(t));
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_freeaddrinfo(res);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "server"))
		server(argv[2], argv[3]);
	else if (argc == 5 && !strcmp(argv[1], "client"))
		client(argv[2], argv[3], argv[4]);
	else if (argc == 4 && !strcmp(argv[1], "refused"))
		refused(argv[2], argv[3]);
	else if (argc == 4 && !strcmp(argv[1], "migrate"))
		migrate(argv[2], argv[3]);
	else {
		fprintf(stderr, "usage: cmsync server|refused|migrate ADDR PORT | cmsync client ADDR PORT K\n");
		return 2;
	}
	return 0;
}
