package daemon

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestProtoHeaderMatches compiles the library's copy of the protocol
// (cmd/libxroce/xroce_proto.h) and compares each struct's size and each constant
// with this package's.
func TestProtoHeaderMatches(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc: apt-get install gcc (.ci/run installs it)")
	}
	hdr, err := filepath.Abs("../../libxroce/xroce_proto.h")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range Structs {
		names = append(names, n)
	}
	sort.Strings(names)
	var src strings.Builder
	fmt.Fprintf(&src, "#include <stdio.h>\n#include %q\nint main(void) {\n", hdr)
	want := ""
	for _, n := range names {
		fmt.Fprintf(&src, "\tprintf(\"%s %%zu\\n\", sizeof(struct %s));\n", n, n)
		want += fmt.Sprintf("%s %d\n", n, binary.Size(Structs[n]))
	}
	consts := []struct {
		c string
		v int
	}{
		{"XROCE_PROTO_VERSION", ProtoVersion}, {"XROCE_HDR_SIZE", HeaderSize}, {"XROCE_MAX_MESSAGE", MaxMessage},
		{"XROCE_REPLY", ReplyBit}, {"XROCE_OP_HELLO", int(OpHello)}, {"XROCE_OP_QUERY_DEVICE", int(OpQueryDevice)},
		{"XROCE_OP_QUERY_PORT", int(OpQueryPort)}, {"XROCE_OP_QUERY_GID", int(OpQueryGID)},
		{"XROCE_OP_COUNTERS", int(OpCounters)}, {"XROCE_OP_CLIENTS", int(OpClients)},
		{"XROCE_OP_ALLOC_PD", int(OpAllocPD)}, {"XROCE_OP_DEALLOC_PD", int(OpDeallocPD)},
		{"XROCE_OP_REG_MR", int(OpRegMR)}, {"XROCE_OP_DEREG_MR", int(OpDeregMR)},
		{"XROCE_OP_CREATE_CHANNEL", int(OpCreateChannel)}, {"XROCE_OP_DESTROY_CHANNEL", int(OpDestroyChannel)},
		{"XROCE_OP_CREATE_CQ", int(OpCreateCQ)}, {"XROCE_OP_DESTROY_CQ", int(OpDestroyCQ)},
		{"XROCE_OP_REQ_NOTIFY_CQ", int(OpReqNotifyCQ)},
		{"XROCE_OP_CREATE_QP", int(OpCreateQP)}, {"XROCE_OP_MODIFY_QP", int(OpModifyQP)},
		{"XROCE_OP_QUERY_QP", int(OpQueryQP)}, {"XROCE_OP_DESTROY_QP", int(OpDestroyQP)},
		{"XROCE_OP_ASYNC_CHANNEL", int(OpAsyncChannel)}, {"XROCE_MR_PIECES", MRPieces}, {"XROCE_QP_RING_HEADER", QPRingHeader}, {"XROCE_QP_RING_SQ_TAIL", QPRingSQTail},
		{"XROCE_QP_RING_RQ_TAIL", QPRingRQTail}, {"XROCE_QP_RING_SLEEPING", QPRingSleeping},
		{"XROCE_CQ_RING_HEADER", CQRingHeader}, {"XROCE_CQ_RING_PROD", CQRingProd},
		{"XROCE_CQ_RING_CONS", CQRingCons}, {"XROCE_CQ_RING_OVERRUN", CQRingOverrun},
		{"XROCE_CQE_RECV", CQERecv}, {"XROCE_CQE_WITH_IMM", CQEWithImm}, {"XROCE_CQE_GRH", CQEGRH},
		{"XROCE_OP_CREATE_AH", int(OpCreateAH)}, {"XROCE_OP_DESTROY_AH", int(OpDestroyAH)},
		{"XROCE_OP_CM_CREATE_ID", int(OpCMCreateID)}, {"XROCE_OP_CM_DESTROY_ID", int(OpCMDestroyID)},
		{"XROCE_OP_CM_BIND", int(OpCMBind)}, {"XROCE_OP_CM_RESOLVE_ADDR", int(OpCMResolveAddr)},
		{"XROCE_OP_CM_RESOLVE_ROUTE", int(OpCMResolveRoute)}, {"XROCE_OP_CM_LISTEN", int(OpCMListen)},
		{"XROCE_OP_CM_CONNECT", int(OpCMConnect)}, {"XROCE_OP_CM_ACCEPT", int(OpCMAccept)},
		{"XROCE_OP_CM_REJECT", int(OpCMReject)}, {"XROCE_OP_CM_DISCONNECT", int(OpCMDisconnect)},
		{"XROCE_OP_CM_MIGRATE_ID", int(OpCMMigrateID)}, {"XROCE_OP_CM_INIT_QP_ATTR", int(OpCMInitQPAttr)},
		{"XROCE_OP_CM_ESTABLISH", int(OpCMEstablish)},
		{"XROCE_OP_CREATE_SRQ", int(OpCreateSRQ)}, {"XROCE_OP_MODIFY_SRQ", int(OpModifySRQ)},
		{"XROCE_OP_QUERY_SRQ", int(OpQuerySRQ)}, {"XROCE_OP_DESTROY_SRQ", int(OpDestroySRQ)},
		{"XROCE_OP_POST_SRQ_RECV", int(OpPostSRQRecv)}, {"XROCE_CQE_SRQ", CQESRQ},
	}
	for _, c := range consts {
		fmt.Fprintf(&src, "\tprintf(\"%s %%d\\n\", (int)%s);\n", c.c, c.c)
		want += fmt.Sprintf("%s %d\n", c.c, c.v)
	}
	src.WriteString("\treturn 0;\n}\n")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.c"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-Wall", "-Werror", "-o", filepath.Join(dir, "p"), filepath.Join(dir, "p.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(dir, "p")).Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != want {
		t.Errorf("xroce_proto.h disagrees with proto.go:\nC:\n%s\nGo:\n%s", out, want)
	}
}
