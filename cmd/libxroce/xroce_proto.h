/*
 * The control protocol between libxroce and `xroce daemon`: a C mirror of
 * cmd/xroce/daemon/proto.go, which defines it (the Go test
 * TestProtoHeaderMatches compiles this header and checks every size and constant).
 * One message per SOCK_SEQPACKET datagram: struct xroce_hdr, then hdr.len payload
 * bytes, little-endian, packed. Replies carry op | XROCE_REPLY and the request's
 * seq; their payload starts with an int32 status (0 or an errno value), then the
 * op's body (status 0) or a message (status != 0). See docs/verbs-library.md.
 */
#ifndef XROCE_PROTO_H
#define XROCE_PROTO_H

#include <stdint.h>

#define XROCE_PROTO_VERSION 6 /* 2: work requests and completions on shared-memory rings; 3: UD and UC QPs; 4: SRQs; 5: CM_MIGRATE_ID; 6: CM_INIT_QP_ATTR, CM_ESTABLISH */
#define XROCE_HDR_SIZE 8
#define XROCE_MAX_MESSAGE 4096
#define XROCE_REPLY 0x8000

enum {
	XROCE_OP_HELLO = 1,
	XROCE_OP_QUERY_DEVICE = 2,
	XROCE_OP_QUERY_PORT = 3,
	XROCE_OP_QUERY_GID = 4,
	XROCE_OP_COUNTERS = 5,
	XROCE_OP_CLIENTS = 6,
	XROCE_OP_ALLOC_PD = 7,
	XROCE_OP_DEALLOC_PD = 8,
	XROCE_OP_REG_MR = 9, /* + one memfd (SCM_RIGHTS) */
	XROCE_OP_DEREG_MR = 10,
	XROCE_OP_CREATE_CHANNEL = 11, /* + the daemon's end of a SOCK_SEQPACKET socketpair */
	XROCE_OP_DESTROY_CHANNEL = 12,
	XROCE_OP_CREATE_CQ = 13, /* reply + the CQ ring's memfd */
	XROCE_OP_DESTROY_CQ = 14,
	XROCE_OP_REQ_NOTIFY_CQ = 15,
	XROCE_OP_CREATE_QP = 17, /* reply + the QP rings' memfd and the doorbell eventfd */
	XROCE_OP_MODIFY_QP = 18,
	XROCE_OP_QUERY_QP = 19,
	XROCE_OP_DESTROY_QP = 20,
	XROCE_OP_CREATE_AH = 21,
	XROCE_OP_DESTROY_AH = 22,
	XROCE_OP_ASYNC_CHANNEL = 23, /* + the daemon's end of a socketpair for xroce_async_event */
};

/* The shared-memory rings (cmd/xroce/daemon/ring.go): offsets of the uint32
 * indexes in a ring's header; each is written by one side only. */
#define XROCE_QP_RING_HEADER 4096
#define XROCE_QP_RING_SQ_TAIL 0    /* library: send WRs written */
#define XROCE_QP_RING_RQ_TAIL 64   /* library: receive WRs written */
#define XROCE_QP_RING_SLEEPING 128 /* daemon: 1 while the engine may sleep */
#define XROCE_CQ_RING_HEADER 4096
#define XROCE_CQ_RING_PROD 0       /* daemon: CQEs written */
#define XROCE_CQ_RING_CONS 64      /* library: CQEs consumed */
#define XROCE_CQ_RING_OVERRUN 128  /* daemon: 1 once the CQ overran (a completion lost; polls go on) */
#define XROCE_CQE_RECV (1u << 0)
#define XROCE_CQE_WITH_IMM (1u << 1)
#define XROCE_CQE_GRH (1u << 2) /* IBV_WC_GRH: a UD receive, src_qp set */
#define XROCE_CQE_SRQ (1u << 3) /* a receive WR of the QP's SRQ: seq is the SRQ's slot */

struct xroce_hdr {
	uint16_t op;
	uint16_t len;
	uint32_t seq;
} __attribute__((packed));

struct xroce_hello_req {
	uint32_t version;
	uint32_t flags;
} __attribute__((packed));

struct xroce_hello_reply {
	uint32_t version;
	uint32_t ports;
	uint64_t node_guid; /* a number; ibv_* report it big-endian */
	char name[64];
	char ifname[16];
	uint32_t ifindex;
	uint32_t flags;
} __attribute__((packed));

/* struct ibv_device_attr's fields in order, then the _ex fields the device sets. */
struct xroce_device_attr {
	char fw_ver[64];
	uint64_t node_guid;
	uint64_t sys_image_guid;
	uint64_t max_mr_size;
	uint64_t page_size_cap;
	uint32_t vendor_id;
	uint32_t vendor_part_id;
	uint32_t hw_ver;
	int32_t max_qp;
	int32_t max_qp_wr;
	uint32_t device_cap_flags;
	int32_t max_sge;
	int32_t max_sge_rd;
	int32_t max_cq;
	int32_t max_cqe;
	int32_t max_mr;
	int32_t max_pd;
	int32_t max_qp_rd_atom;
	int32_t max_ee_rd_atom;
	int32_t max_res_rd_atom;
	int32_t max_qp_init_rd_atom;
	int32_t max_ee_init_rd_atom;
	uint32_t atomic_cap;
	int32_t max_ee;
	int32_t max_rdd;
	int32_t max_mw;
	int32_t max_raw_ipv6_qp;
	int32_t max_raw_ethy_qp;
	int32_t max_mcast_grp;
	int32_t max_mcast_qp_attach;
	int32_t max_total_mcast_qp_attach;
	int32_t max_ah;
	int32_t max_fmr;
	int32_t max_map_per_fmr;
	int32_t max_srq;
	int32_t max_srq_wr;
	int32_t max_srq_sge;
	uint16_t max_pkeys;
	uint8_t local_ca_ack_delay;
	uint8_t phys_port_cnt;
	uint64_t device_cap_flags_ex;
	uint64_t completion_timestamp_mask;
	uint64_t hca_core_clock;
	uint32_t num_comp_vectors;
	uint32_t reserved;
} __attribute__((packed));

struct xroce_port_req {
	uint32_t port;
} __attribute__((packed));

/* struct ibv_port_attr's fields in order. */
struct xroce_port_attr {
	uint32_t state;
	uint32_t max_mtu;
	uint32_t active_mtu;
	int32_t gid_tbl_len;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint32_t bad_pkey_cntr;
	uint32_t qkey_viol_cntr;
	uint16_t pkey_tbl_len;
	uint16_t lid;
	uint16_t sm_lid;
	uint8_t lmc;
	uint8_t max_vl_num;
	uint8_t sm_sl;
	uint8_t subnet_timeout;
	uint8_t init_type_reply;
	uint8_t active_width;
	uint8_t active_speed;
	uint8_t phys_state;
	uint8_t link_layer;
	uint8_t flags;
	uint16_t port_cap_flags2;
	uint16_t reserved;
	uint32_t active_speed_ex;
} __attribute__((packed));

struct xroce_gid_req {
	uint32_t port;
	uint32_t index;
} __attribute__((packed));

struct xroce_gid_reply {
	uint8_t raw[16];
	uint32_t type; /* enum ibv_gid_type */
	uint32_t ifindex;
	uint32_t valid; /* 0: an empty slot (zero GID) */
	uint32_t index;
} __attribute__((packed));

struct xroce_counter_entry {
	char name[32];
	uint64_t value;
} __attribute__((packed));

struct xroce_client_entry {
	uint32_t pid;
	uint32_t uid;
	int64_t since;
	uint32_t pds, mrs, cqs, qps; /* the objects its session owns */
	uint32_t srqs, reserved;     /* version 4 */
} __attribute__((packed));

/* ---- the data path: objects are named by per-session handles ---- */

struct xroce_handle {
	uint32_t handle;
} __attribute__((packed));

/* [addr, addr+length) lies in the app's pages [map_addr, map_addr+map_len), which
 * are the sent memfd's bytes from fd_off (page-aligned; the memfd is sealed with
 * F_SEAL_SHRINK). */
#define XROCE_MR_PIECES 8

/* one memfd's part of a registration's mapping, in the order of the descriptors */
struct xroce_mr_piece {
	uint64_t len;
	uint64_t fd_off;
} __attribute__((packed));

/* + npieces memfds: the pages [map_addr, map_addr + map_len) are the pieces, in order */
struct xroce_reg_mr_req {
	uint32_t pd;
	uint32_t access;
	uint64_t addr;
	uint64_t length;
	uint64_t iova;
	uint64_t map_addr;
	uint64_t map_len;
	uint32_t npieces;
	uint32_t reserved;
	struct xroce_mr_piece pieces[XROCE_MR_PIECES];
} __attribute__((packed));

struct xroce_reg_mr_reply {
	uint32_t handle;
	uint32_t lkey;
	uint32_t rkey;
	uint32_t reserved;
} __attribute__((packed));

struct xroce_create_cq_req {
	uint32_t cqe;
	uint32_t channel; /* 0: none */
	uint64_t cookie;  /* echoed in the channel's events */
} __attribute__((packed));

struct xroce_create_cq_reply {
	uint32_t handle;
	uint32_t cqe;
	uint32_t entries; /* CQE slots after XROCE_CQ_RING_HEADER, a power of two */
	uint32_t reserved;
	uint64_t ring_size;
} __attribute__((packed));

struct xroce_notify_req {
	uint32_t cq;
	uint32_t solicited_only;
} __attribute__((packed));

/* one completion in a CQ ring: seq is the ring sequence number of the WR it
 * completes (the receive ring's with XROCE_CQE_RECV, else the send ring's) */
struct xroce_cqe {
	uint32_t seq;
	uint32_t flags;
	uint32_t status;
	uint32_t opcode;
	uint32_t byte_len;
	uint32_t imm_data; /* host order */
	uint32_t qp_num;
	uint32_t src_qp; /* UD receives (XROCE_CQE_GRH) */
} __attribute__((packed));

/* what the daemon writes on a completion channel */
struct xroce_event {
	uint64_t cookie;
} __attribute__((packed));

/* what the daemon writes on the asynchronous event channel: type is enum
 * ibv_event_type, cookie the CQ's or QP's from its create request */
struct xroce_async_event {
	uint32_t type;
	uint32_t reserved;
	uint64_t cookie;
} __attribute__((packed));

struct xroce_create_qp_req {
	uint32_t pd, send_cq, recv_cq;
	uint32_t qp_type, sq_sig_all;
	uint32_t max_send_wr, max_recv_wr;
	uint32_t max_send_sge, max_recv_sge;
	uint32_t max_inline;
	uint64_t cookie; /* echoed in the QP's asynchronous events */
	uint32_t srq;    /* the SRQ the QP receives from (version 4; 0: none) */
	uint32_t reserved;
} __attribute__((packed));

struct xroce_create_qp_reply {
	uint32_t handle, qpn;
	uint32_t max_send_wr, max_recv_wr;
	uint32_t max_send_sge, max_recv_sge;
	uint32_t max_inline;
	uint32_t max_ud_msg; /* UD: the largest message (the port's MTU), 0 otherwise */
	uint32_t sq_entries, sq_stride;
	uint32_t rq_entries, rq_stride;
	uint64_t sq_offset, rq_offset;
	uint64_t ring_size;
} __attribute__((packed));

/* MODIFY_QP's request and QUERY_QP's reply; mask is enum ibv_qp_attr_mask */
struct xroce_qp_attr {
	uint32_t qp, mask;
	uint32_t state, path_mtu;
	uint32_t dest_qpn, rq_psn, sq_psn;
	uint32_t access_flags;
	uint8_t dgid[16];
	uint32_t flow_label;
	uint8_t sgid_index, hop_limit;
	uint8_t traffic_class, max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t min_rnr_timer, timeout;
	uint8_t retry_cnt, rnr_retry;
	uint8_t port_num, is_global;
	uint8_t cur_state; /* attr->cur_qp_state, under IBV_QP_CUR_STATE */
	uint16_t pkey_index;
	uint16_t reserved2;
	uint32_t qkey; /* UD */
} __attribute__((packed));

/* CREATE_AH's request: struct ibv_ah_attr (RoCE: is_global 1) */
struct xroce_create_ah_req {
	uint32_t pd;
	uint32_t flow_label;
	uint8_t dgid[16];
	uint8_t sgid_index, hop_limit;
	uint8_t traffic_class, is_global;
	uint8_t port_num, sl;
	uint16_t reserved;
} __attribute__((packed));

/* A send ring slot: xroce_send_wr, then num_sge × xroce_sge or inline_len bytes;
 * a receive ring slot: xroce_recv_wr, then num_sge × xroce_sge. The library
 * keeps wr_id (the daemon ignores it). */
struct xroce_send_wr {
	uint64_t wr_id;
	uint64_t remote_addr;
	uint64_t compare_add;
	uint64_t swap;
	uint32_t rkey;
	uint32_t imm_data; /* host order */
	uint32_t opcode;
	uint32_t flags;
	uint32_t num_sge;
	uint32_t inline_len;
	uint32_t ah; /* wr.ud, UD QPs: an address handle's handle */
	uint32_t remote_qpn;
	uint32_t remote_qkey;
	uint32_t reserved;
} __attribute__((packed));

struct xroce_recv_wr {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t reserved;
} __attribute__((packed));

struct xroce_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
} __attribute__((packed));

/* The connection manager (librdmacm's functions; cmd/xroce/daemon/cmproto.go). */
#define XROCE_OP_CM_CREATE_ID 24
#define XROCE_OP_CM_DESTROY_ID 25
#define XROCE_OP_CM_BIND 26
#define XROCE_OP_CM_RESOLVE_ADDR 27
#define XROCE_OP_CM_RESOLVE_ROUTE 28
#define XROCE_OP_CM_LISTEN 29
#define XROCE_OP_CM_CONNECT 30
#define XROCE_OP_CM_ACCEPT 31
#define XROCE_OP_CM_REJECT 32
#define XROCE_OP_CM_DISCONNECT 33
#define XROCE_OP_CM_MIGRATE_ID 39 /* xroce_cm_migrate -> no body (version 5) */
#define XROCE_OP_CM_INIT_QP_ATTR 40 /* xroce_cm_init_qp_attr -> xroce_qp_attr (version 6) */
#define XROCE_OP_CM_ESTABLISH 41    /* xroce_handle -> no body (version 6) */

/* family AF_INET or AF_INET6; port in host order; addr from its first byte */
struct xroce_cm_addr {
	uint16_t family;
	uint16_t port;
	uint32_t scope_id;
	uint8_t addr[16];
} __attribute__((packed));

struct xroce_cm_create_id {
	uint32_t channel; /* a completion channel's handle: the event channel */
	uint32_t ps;      /* enum rdma_port_space */
	uint32_t qp_type; /* enum ibv_qp_type */
	uint32_t reserved;
	uint64_t cookie;  /* echoed in the id's events */
} __attribute__((packed));

struct xroce_cm_bind {
	uint32_t handle, reserved;
	struct xroce_cm_addr addr;
} __attribute__((packed));

struct xroce_cm_resolve {
	uint32_t handle, timeout_ms;
	struct xroce_cm_addr src, dst;
} __attribute__((packed));

/* rdma_migrate_id: the id's events go to channel (a completion channel's handle) */
struct xroce_cm_migrate {
	uint32_t handle, channel;
} __attribute__((packed));

/* rdma_init_qp_attr: the attributes for moving the id's QP to state (enum ibv_qp_state) */
struct xroce_cm_init_qp_attr {
	uint32_t handle, state;
} __attribute__((packed));

struct xroce_cm_listen {
	uint32_t handle;
	int32_t backlog;
} __attribute__((packed));

/* struct rdma_conn_param, flattened; qp_num is the peer's in events */
struct xroce_cm_param {
	uint8_t responder_resources, initiator_depth;
	uint8_t flow_control, retry_count, rnr_retry_count, srq;
	uint8_t private_data_len, reserved;
	uint32_t qp_num;
	uint8_t private_data[196];
} __attribute__((packed));

struct xroce_cm_conn {
	uint32_t handle, qp;
	uint8_t tos, reserved[7];
	struct xroce_cm_param param;
} __attribute__((packed));

struct xroce_cm_reject {
	uint32_t handle, private_data_len;
	uint8_t private_data[148];
} __attribute__((packed));

/* one rdma_cm event on the event channel: cookie is the id's, or for
 * CONNECT_REQUEST the listening id's with handle the new id */
struct xroce_cm_event {
	uint64_t cookie;
	uint32_t handle, event;
	int32_t status;
	uint32_t qkey; /* RDMA_PS_UDP's ESTABLISHED: the peer QP's (param.qp_num its QPN) */
	struct xroce_cm_addr local, remote;
	struct xroce_cm_param param;
} __attribute__((packed));
/* Shared receive queues (cmd/xroce/daemon/srqproto.go). */
#define XROCE_OP_CREATE_SRQ 34    /* xroce_create_srq_req -> xroce_create_srq_reply */
#define XROCE_OP_MODIFY_SRQ 35    /* xroce_srq_attr -> no body */
#define XROCE_OP_QUERY_SRQ 36     /* xroce_handle -> xroce_srq_attr */
#define XROCE_OP_DESTROY_SRQ 37   /* xroce_handle -> no body */
#define XROCE_OP_POST_SRQ_RECV 38 /* xroce_post_srq_recv_req, count x (xroce_recv_wr, SGEs) -> reply */

struct xroce_create_srq_req {
	uint32_t pd, max_wr, max_sge, limit;
	uint64_t cookie; /* echoed in the SRQ's asynchronous events */
} __attribute__((packed));

struct xroce_create_srq_reply {
	uint32_t handle, max_wr, max_sge, reserved;
} __attribute__((packed));

struct xroce_srq_attr {
	uint32_t srq, mask, max_wr, max_sge, limit, reserved;
} __attribute__((packed));

struct xroce_post_srq_recv_req {
	uint32_t srq, count;
} __attribute__((packed));

struct xroce_post_srq_recv_reply {
	uint32_t posted;
	int32_t err; /* errno of the first WR not posted, 0 when all were */
} __attribute__((packed));

#endif
