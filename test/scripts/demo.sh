#!/usr/bin/env bash
# make demo: two network namespaces joined by a veth pair, an xroce write_bw server in
# one and a client in the other, over AF_XDP, with data verification. Everything it
# creates is removed on exit, on failure and on Ctrl-C. Needs root.
set -euo pipefail
bin=${XROCE:-bin/xroce}
if [ "$(id -u)" != 0 ]; then
	echo "make demo needs root: it creates network namespaces and attaches an XDP program (sudo make demo)" >&2
	exit 1
fi
command -v ip >/dev/null || { echo "make demo needs iproute2 (apt-get install -y iproute2)" >&2; exit 1; }
id=$(printf '%04x' $((RANDOM)))
A=xrdemo${id}a B=xrdemo${id}b VA=xrd${id}a VB=xrd${id}b
srv=
cleanup() {
	[ -n "$srv" ] && kill "$srv" 2>/dev/null || true
	ip netns del "$A" 2>/dev/null || true
	ip netns del "$B" 2>/dev/null || true
	rm -f "/tmp/xroce-demo-server.$id" "${cap:-}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$A"
ip netns add "$B"
ip link add "$VA" netns "$A" type veth peer name "$VB" netns "$B"
ip -n "$A" addr add 10.99.0.1/24 dev "$VA"
ip -n "$B" addr add 10.99.0.2/24 dev "$VB"
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set "$VA" up
ip -n "$B" link set "$VB" up

echo "== namespaces $A (10.99.0.1) and $B (10.99.0.2), veth $VA <-> $VB, AF_XDP (XDP mode auto: native on veth)"
cap="/tmp/xroce-demo.$id.pcapng"
ip netns exec "$B" "$bin" write_bw -d "$VB" --verify -n 2000 --pcap "$cap" > "/tmp/xroce-demo-server.$id" 2>&1 &
srv=$!
for _ in $(seq 50); do
	grep -q "Waiting for client" "/tmp/xroce-demo-server.$id" 2>/dev/null && break
	sleep 0.1
done
echo "== client (xroce write_bw -d $VA --verify -n 2000 10.99.0.2):"
ip netns exec "$A" "$bin" write_bw -d "$VA" --verify -n 2000 10.99.0.2
status=0
wait "$srv" || status=$?

srv=
echo "== server (xroce write_bw -d $VB --verify -n 2000 --pcap $cap):"
sed -n '/#bytes/,$p' "/tmp/xroce-demo-server.$id"
[ "$status" = 0 ] || exit "$status"
# Assigned first: set -e does not see a failure (a Ctrl-C) inside an argument's $(...).
summary=$("$bin" dump "$cap" | tail -n 1)
echo "== the server's recording: $summary"
echo "== replayed into a fresh engine as 10.99.0.2 (xroce replay $cap --as 10.99.0.2):"
"$bin" replay "$cap" --as 10.99.0.2 | tail -n 2
