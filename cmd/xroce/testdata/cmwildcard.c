/*
 * cmwildcard ADDR2 PORT: a wildcard listener in a namespace of two xroce devices,
 * through xroce run (TestVerbsCMWildcardRefused). ADDR2 is the second device's
 * address. Prints one line a step, then "ok":
 *   - a listener of ADDR2:PORT listens;
 *   - a wildcard id is refused PORT at rdma_bind_addr (EADDRNOTAVAIL, as rdma_cm's
 *     cma_check_port: every address beside another one, in the namespace's port
 *     space, though the listener is another device's);
 *   - once the first listener is gone, the same id binds (once: a second bind is
 *     EINVAL) and listens (on every device);
 *   - rdma_migrate_id moves it, and the other devices' listeners behind it, to a
 *     second channel: each connect request, through either device, comes there
 *     (and is rejected), none on the first channel.
 * It prints "listening" before it waits for the requests, and stops after two.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>

static struct sockaddr_in sin4(const char *a, int port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(port) };

	if (a)
		inet_pton(AF_INET, a, &s.sin_addr);
	return s;
}

static void result(const char *what, int ret)
{
	if (ret)
		printf("%s: %d errno %d\n", what, ret, errno);
	else
		printf("%s: 0\n", what);
}

/* pending reports whether ch has an event to read within ms. */
static int pending(struct rdma_event_channel *ch, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1;
}

int main(int argc, char **argv)
{
	struct rdma_event_channel *ch1, *ch2;
	struct rdma_cm_id *one, *any, *req;
	struct rdma_cm_event *ev;
	struct sockaddr_in a2, wild;
	int port, i;

	if (argc != 3)
		return fprintf(stderr, "usage: cmwildcard ADDR2 PORT\n"), 2;
	port = atoi(argv[2]);
	a2 = sin4(argv[1], port);
	wild = sin4(NULL, port);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!(ch1 = rdma_create_event_channel()) || !(ch2 = rdma_create_event_channel()))
		return perror("rdma_create_event_channel"), 1;
	if (rdma_create_id(ch1, &one, NULL, RDMA_PS_TCP) || rdma_create_id(ch1, &any, NULL, RDMA_PS_TCP))
		return perror("rdma_create_id"), 1;
	result("bind ADDR2", rdma_bind_addr(one, (struct sockaddr *)&a2));
	result("listen ADDR2", rdma_listen(one, 4));
	result("bind any beside ADDR2", rdma_bind_addr(any, (struct sockaddr *)&wild));
	result("destroy ADDR2's", rdma_destroy_id(one));
	result("bind any", rdma_bind_addr(any, (struct sockaddr *)&wild));
	result("bind any again", rdma_bind_addr(any, (struct sockaddr *)&wild));
	result("listen any", rdma_listen(any, 4));
	result("migrate", rdma_migrate_id(any, ch2));
	printf("listening\n");
	for (i = 0; i < 2; i++) {
		char dst[INET_ADDRSTRLEN];

		if (rdma_get_cm_event(ch2, &ev))
			return perror("rdma_get_cm_event"), 1;
		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST || ev->listen_id != any) {
			printf("event %s on the second channel\n", rdma_event_str(ev->event));
			return 1;
		}
		req = ev->id;
		rdma_ack_cm_event(ev);
		inet_ntop(AF_INET, &((struct sockaddr_in *)rdma_get_local_addr(req))->sin_addr, dst, sizeof(dst));
		printf("request to %s on the second channel, for the listener\n", strcmp(dst, argv[1]) ? "the first device" : "ADDR2");
		rdma_reject(req, NULL, 0);
		rdma_destroy_id(req);
	}
	printf("events on the first channel: %d\n", pending(ch1, 200));
	result("destroy any", rdma_destroy_id(any));
	printf("ok\n");
	return 0;
}
