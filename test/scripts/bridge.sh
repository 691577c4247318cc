# test/scripts/bridge.sh, sourced by the benchmark scripts: three network namespaces,
# A and B each with a veth into a bridge in M, addresses $1.1 and $1.2/24 (A, B);
# sets A B M VA VB PA PB (PB: the bridge port towards B), tmp (a scratch directory)
# and srv (the server's pid, for the caller to set), and removes everything on exit.
# Needs root and iproute2.
# shellcheck shell=bash disable=SC2034 # the variables are the caller's
net=$1
id=$(printf '%04x' $((RANDOM)))
A=xrb${id}a B=xrb${id}b M=xrb${id}m VA=xba$id VB=xbb$id PA=xpa$id PB=xpb$id
tmp=$(mktemp -d)
srv=
cleanup() {
	[ -n "$srv" ] && kill "$srv" 2>/dev/null || true
	for ns in "$A" "$B" "$M"; do ip netns del "$ns" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for ns in "$A" "$B" "$M"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip -n "$M" link add br0 type bridge
ip link add "$VA" netns "$A" type veth peer name "$PA" netns "$M"
ip link add "$VB" netns "$B" type veth peer name "$PB" netns "$M"
for p in "$PA" "$PB"; do ip -n "$M" link set "$p" master br0 up; done
ip -n "$M" link set br0 up
ip -n "$A" addr add "$net.1/24" dev "$VA"
ip -n "$B" addr add "$net.2/24" dev "$VB"
ip -n "$A" link set "$VA" up
ip -n "$B" link set "$VB" up
