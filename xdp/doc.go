// Package xdp holds xroce's datapath links, the transport.Link implementations that
// reach a real network:
//
//   - Link, on AF_XDP sockets (package xsk, multi-buffer where the kernel has it) fed
//     by the XDP program of package bpf: RoCEv2 frames bypass the kernel stack,
//     everything else still reaches it;
//   - UDPLink, on a kernel UDP socket bound to port 4791, for hosts where XDP cannot
//     attach or processes without CAP_NET_ADMIN and CAP_BPF.
//
// Both resolve addresses and list the interface's addresses through
// github.com/vishvananda/netlink, and can be opened inside another network namespace.
package xdp
