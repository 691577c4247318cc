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

#define XROCE_PROTO_VERSION 1
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
};

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
} __attribute__((packed));

#endif
