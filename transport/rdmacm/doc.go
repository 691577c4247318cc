// Package rdmacm is the RDMA connection manager of a transport.Device: what
// librdmacm and the kernel's rdma_cm (drivers/infiniband/core/cma.c over cm.c) do
// for an application on RoCEv2, so that rdma_cm peers (rping, `ib_write_bw -R`,
// NVMe-oF, …) connect to xroce and xroce to them.
//
// A Service owns the device's QP1 (the GSI: a UD QP with Q_Key 0x80010000) and runs
// one transport/ibcm Manager on it. Addresses are IP addresses and ports in the
// RDMA_PS_TCP port space (IBTA Vol 1 Annex A11, the RDMA IP CM Service): Listen(port)
// takes REQs for Service ID 0x0000000001060000 | port; Dial sends one, with the IP CM
// header (struct cma_hdr) at the start of its private data. Both sides move their RC
// QP through INIT, RTR and RTS with the attributes the kernel's cm_init_qp_*_attr
// derive from the REQ and REP, as librdmacm's rdma_accept and rdma_connect do, then
// the CM's RTU establishes the connection. Disconnect moves the QP to the error
// state and sends a DREQ, or the DREP when the peer's DREQ came first
// (rdma_disconnect).
//
// The Service's goroutine polls QP1's completion queue and runs the CM timers; every
// other call may come from any goroutine.
package rdmacm
