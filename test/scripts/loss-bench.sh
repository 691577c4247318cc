#!/usr/bin/env bash
# scripts/loss-bench.sh: xroce <-> xroce goodput through a bridge with random loss,
# for one or more xroce binaries in the same run (docs/congestion.md). Three network
# namespaces: A and B, each with a veth into a bridge in M, where nftables (bridge
# family, forward hook) drops N % of the RoCE frames at random: this kernel has no
# netem, and AF_XDP bypasses qdiscs and netfilter on its own interfaces. For each
# operation, loss rate and binary: an xroce *_bw server in B and client in A over
# AF_XDP with --verify, 1 MiB messages, PMTU 1024, for SECONDS seconds (-D). Prints
# one line per run and a table at the end. Everything is removed on exit. Needs root.
# KEEP=DIR keeps every run's client and server output there.
#
#   scripts/loss-bench.sh [-D SECONDS] [-l "0 2 5"] [-o "write read send"] NAME=BINARY...
set -euo pipefail
secs=3 losses="0 2 5" ops="write read send"
while getopts "D:l:o:" o; do
	case $o in
	D) secs=$OPTARG ;;
	l) losses=$OPTARG ;;
	o) ops=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "usage: $0 [-D SECONDS] [-l LOSSES] [-o OPS] NAME=BINARY..." >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "$0 needs root" >&2; exit 1; }

id=$(printf '%04x' $((RANDOM)))
A=xrl${id}a B=xrl${id}b M=xrl${id}m VA=xla$id VB=xlb$id PA=xpa$id PB=xpb$id
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
ip -n "$A" addr add 10.98.0.1/24 dev "$VA"
ip -n "$B" addr add 10.98.0.2/24 dev "$VB"
ip -n "$A" link set "$VA" up
ip -n "$B" link set "$VB" up
ip netns exec "$M" nft add table bridge chaos
ip netns exec "$M" nft add chain bridge chaos fw '{ type filter hook forward priority 0; }'

declare -A bw
# iters is -n for a loss rate: about SECONDS seconds at the goodput the fixed window
# had (issue 18) would take far longer at 2 and 5 %, so those run fewer messages.
iters() {
	case $1 in
	0) echo $((secs * 150)) ;;
	*) echo $((secs * 30 / $1 + 10)) ;;
	esac
}
run() { # name binary op loss
	local name=$1 bin=$2 op=$3 loss=$4 args out
	args=("${op}_bw" -s 1048576 -m 1024 -n "$(iters "$loss")" --verify --counters)
	ip netns exec "$B" "$bin" "${args[@]}" -d "$VB" >"$tmp/srv" 2>&1 &
	srv=$!
	for _ in $(seq 100); do grep -q "Waiting for client" "$tmp/srv" 2>/dev/null && break; sleep 0.05; done
	if ! timeout $((secs + 120)) ip netns exec "$A" "$bin" "${args[@]}" -d "$VA" 10.98.0.2 >"$tmp/cli" 2>&1; then
		echo "!! $name $op ${loss}%: client failed:" >&2
		cat "$tmp/cli" >&2
	fi
	wait "$srv" || { echo "!! $name $op ${loss}%: server failed:" >&2; cat "$tmp/srv" >&2; }
	srv=
	if [ -n "${KEEP:-}" ]; then # KEEP=DIR keeps each run's output
		cp "$tmp/cli" "$KEEP/$name-$op-$loss-client.txt"
		cp "$tmp/srv" "$KEEP/$name-$op-$loss-server.txt"
	fi
	# The client's summary line: #bytes #iterations BW-peak BW-average MsgRate.
	out=$(awk '$1 == 1048576 && NF == 5 { l = $4 } END { print l }' "$tmp/cli")
	bw[$name,$op,$loss]=${out:-FAILED}
	printf '%-8s %-5s %2s%%  %8s MiB/s  %s\n' "$name" "$op" "$loss" "${out:-FAILED}" \
		"$(grep -h -i -o 'verified.*' "$tmp/cli" "$tmp/srv" | head -1)"
	# The requester's retransmission counters (the client is the requester of every test).
	awk '/Counters/ { f = 1; next } f && NF == 2 && $1 ~ /^(sent_pkts|rcvd_seq_err|implied_nak|local_ack_timeout_err|roce_adp_retrans|roce_slow_restart|completer_retry_err)$/ { printf "%s=%s ", $1, $2 }
		END { print "" }' "$tmp/cli" | sed 's/^/    client: /'
}

for op in $ops; do
	for loss in $losses; do
		ip netns exec "$M" nft flush chain bridge chaos fw
		if [ "$loss" != 0 ]; then
			ip netns exec "$M" nft add rule bridge chaos fw udp dport 4791 numgen random mod 100 '<' "$loss" drop
		fi
		for nb in "$@"; do
			run "${nb%%=*}" "${nb#*=}" "$op" "$loss"
		done
	done
done

echo
printf '| op | loss |'
for nb in "$@"; do printf ' %s MiB/s |' "${nb%%=*}"; done
echo
printf '| --- | --- |'
for _ in "$@"; do printf ' --- |'; done
echo
for op in $ops; do
	for loss in $losses; do
		printf '| %s | %s %% |' "${op^^}" "$loss"
		for nb in "$@"; do
			name=${nb%%=*} v=${bw[${nb%%=*},$op,$loss]} base=${bw[${nb%%=*},$op,0]:-}
			if [ "$loss" != 0 ] && [ -n "$base" ] && [ "$v" != FAILED ] && [ "$base" != FAILED ]; then
				printf ' %s (%s %%) |' "$v" "$(awk -v a="$v" -v b="$base" 'BEGIN { printf "%.0f", 100 * a / b }')"
			else
				printf ' %s |' "$v"
			fi
		done
		echo
	done
done
