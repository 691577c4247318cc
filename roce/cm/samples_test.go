package cm_test

import (
	"net/netip"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
)

// samplePath is a path with every field distinct from zero, between IPv4 GIDs
// (n even) or IPv6 ones (n odd).
func samplePath(n byte) cm.Path {
	p := cm.Path{LocalPortLID: 0xFFFF, RemotePortLID: 0xFFFE, LocalPortGID: gid("10.77.0.12"),
		RemotePortGID: gid("10.77.0.11"), FlowLabel: 0x2acef + uint32(n), PacketRate: 0x2a,
		TrafficClass: 0x6a, HopLimit: 64, SL: 5, SubnetLocal: true, LocalACKTimeout: 0x13}
	if n%2 == 1 {
		p.LocalPortGID, p.RemotePortGID = gid("fd00:77::c"), gid("fd00:77::b")
	}
	return p
}

func pattern[A ~[72]byte | ~[92]byte | ~[136]byte | ~[148]byte | ~[168]byte | ~[196]byte | ~[216]byte | ~[220]byte | ~[222]byte | ~[224]byte](seed byte) A {
	var a A
	for i := range len(a) {
		a[i] = seed + byte(i*7)
	}
	return a
}

// samples returns one message of each CM attribute with distinctive values.
func samples() []cm.Message {
	req := &cm.REQ{LocalCommID: 0xb096cb43, VendorID: 0x02c9, ServiceID: cm.IPServiceID(cm.PortSpaceTCP, 18515),
		LocalCAGUID: 0x505400fffe77000c, LocalQKey: 0x11223344, LocalQPN: 0x1d, ResponderResources: 16,
		LocalEECN: 0x123456, InitiatorDepth: 8, RemoteEECN: 0x654321, RemoteCMResponseTimeout: 20,
		TransportServiceType: cm.TransportUC, EndToEndFlowControl: true, StartingPSN: 0x778393,
		LocalCMResponseTimeout: 20, RetryCount: 7, PKey: 0xffff, PathMTU: roce.MTU1024, RDCExists: true,
		RNRRetryCount: 6, MaxCMRetries: 15, SRQ: true, ExtendedTransportType: 1,
		Primary: samplePath(0), Alternate: samplePath(2), SAPSupported: true}
	ip := cm.NewIPCMHeader(netip.MustParseAddrPort("10.77.0.12:38884"), netip.MustParseAddr("10.77.0.11"))
	ip.Put(req.PrivateData[:])
	copy(req.PrivateData[cm.IPCMHeaderLen:], "consumer data")
	// The same over IPv6: the primary path's GIDs and the IP CM header.
	req6 := *req
	req6.Primary, req6.Alternate = samplePath(1), samplePath(3)
	ip = cm.NewIPCMHeader(netip.MustParseAddrPort("[fd00:77::c]:38884"), netip.MustParseAddr("fd00:77::b"))
	ip.Put(req6.PrivateData[:])
	return []cm.Message{
		req, &req6,
		&cm.MRA{LocalCommID: 1, RemoteCommID: 2, MessageMRAed: cm.RefREP, ServiceTimeout: 23, PrivateData: pattern[[cm.MRAPrivateDataLen]byte](1)},
		&cm.REJ{LocalCommID: 3, RemoteCommID: 0xb096cb43, MessageRejected: cm.RefREQ, RejectedInfoLength: 1,
			Reason: cm.RejInvalidPathMTU, ARI: [cm.ARILen]byte{0: byte(roce.MTU1024) << 4}, PrivateData: pattern[[cm.REJPrivateDataLen]byte](2)},
		&cm.REP{LocalCommID: 0xece6495e, RemoteCommID: 0xb096cb43, LocalQKey: 0x55667788, LocalQPN: 0x1e, LocalEECN: 0x0a0b0c,
			StartingPSN: 0x543f47, VendorID: 0x0002c9, ResponderResources: 4, InitiatorDepth: 2, TargetACKDelay: 15,
			FailoverAccepted: 2, EndToEndFlowControl: true, RNRRetryCount: 7, SRQ: true, LocalCAGUID: 0x505400fffe77000b,
			PrivateData: pattern[[cm.REPPrivateDataLen]byte](3)},
		&cm.RTU{LocalCommID: 0xb096cb43, RemoteCommID: 0xece6495e, PrivateData: pattern[[cm.RTUPrivateDataLen]byte](4)},
		&cm.DREQ{LocalCommID: 5, RemoteCommID: 6, RemoteQPNEECN: 0x1d, PrivateData: pattern[[cm.DREQPrivateDataLen]byte](5)},
		&cm.DREP{LocalCommID: 6, RemoteCommID: 5, PrivateData: pattern[[cm.DREPPrivateDataLen]byte](6)},
		&cm.LAP{LocalCommID: 7, RemoteCommID: 8, RemoteQPNEECN: 0x1f, RemoteCMResponseTimeout: 18, Alternate: samplePath(5),
			PrivateData: pattern[[cm.LAPPrivateDataLen]byte](7)},
		&cm.APR{LocalCommID: 8, RemoteCommID: 7, AdditionalInfoLength: 3, APStatus: cm.APInvalidGID,
			AdditionalInfo: [cm.APRInfoLen]byte{1, 2, 3}, PrivateData: pattern[[cm.APRPrivateDataLen]byte](8)},
		&cm.SIDRREQ{RequestID: 9, PKey: 0x8001, ServiceID: cm.IPServiceID(cm.PortSpaceUDP, 7174), PrivateData: pattern[[cm.SIDRREQPrivateDataLen]byte](9)},
		&cm.SIDRREP{RequestID: 9, Status: cm.SIDRValid, VendorID: 0x0002c9, QPN: 0x20, ServiceID: cm.IPServiceID(cm.PortSpaceUDP, 7174),
			QKey: 0x01234567, PrivateData: pattern[[cm.SIDRREPPrivateDataLen]byte](10)},
	}
}

// sampleFrame returns m in a MAD (transaction ID tid) in a RoCEv2 frame from
// 10.77.0.12 to 10.77.0.11 (or fd00:77::c to fd00:77::b), as rdma_rxe's QP1 sends.
func sampleFrame(m cm.Message, tid uint64, psn uint32, v6 bool) []byte {
	mad := make([]byte, cm.MADLen)
	cm.Encode(mad, cm.CMHeader(tid, 0), m)
	p := roce.Packet{IsIPv6: v6}
	p.Eth.Dst = [6]byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x0b}
	p.Eth.Src = [6]byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x0c}
	if v6 {
		p.IPv6 = roce.IPv6{HopLimit: 64, Src: netip.MustParseAddr("fd00:77::c").As16(), Dst: netip.MustParseAddr("fd00:77::b").As16()}
	} else {
		p.IPv4 = roce.IPv4{ID: 0x57b7, FlagsFrag: 0x4000, TTL: 64, Src: [4]byte{10, 77, 0, 12}, Dst: [4]byte{10, 77, 0, 11}}
	}
	p.UDP.SrcPort = cm.RxeGSISourcePort
	cm.SetGSIDatagram(&p, mad, 0xffff, psn)
	b := make([]byte, p.Len())
	if _, err := p.Encode(b); err != nil {
		panic(err)
	}
	return b
}
