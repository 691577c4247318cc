// Package verbs runs the xroce tools' workloads through libibverbs, on a hardware
// HCA (mlx5, ConnectX-4 and later) or on the kernel's rdma_rxe, so the same workload
// can be cross-checked against the pure-Go engine in package transport.
//
// It is built only with the build tag "verbs" and cgo, against Debian's
// libibverbs-dev (rdma-core 44 or later): go build -tags verbs. Without the tag the
// package is empty and the rest of xroce stays pure Go (CGO_ENABLED=0 works).
//
// Its types take and return package transport's work requests, completions and
// attributes, whose numeric values are verbs' own (enum ibv_wr_opcode,
// ibv_wc_status, ibv_wc_opcode, ibv_qp_attr_mask, ibv_send_flags, ibv_access_flags;
// <infiniband/verbs.h>).
package verbs
