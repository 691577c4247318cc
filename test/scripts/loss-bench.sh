#!/usr/bin/env bash
# test/scripts/loss-bench.sh: xroce <-> xroce goodput through a bridge with random loss,
# for one or more xroce binaries in the same run (docs/congestion.md).
#
# Three network namespaces: A and B, each with a veth into a bridge in M, where
# nftables (bridge family, forward hook) drops N % of the RoCE frames at random: this
# kernel has no netem, and AF_XDP bypasses qdiscs and netfilter on its own
# interfaces. For each pass, operation, loss rate and binary (binaries alternate, so
# they share the machine's load): an xroce *_bw server in B and client in A over
# AF_XDP with --verify-all (the side the data goes to checks every message: each has
# content and a buffer slot of its own) and --counters, 1 MiB messages, path MTU
# 1024. The number of messages depends on the loss rate (-n below) so that a slow
# binary still ends; it stays at most 1024 (--verify-all's 1 GiB of 1 MiB slots).
# VERIFY=--verify runs binaries older than --verify-all (the last message checked).
# Prints a line per run (goodput, what was verified, the requester's retransmission
# counters) and a table of medians over the passes with each loss row's ratio to the
# lossless row of the same binary. Everything is removed on exit. Needs root.
#
#   test/scripts/loss-bench.sh [-p PASSES] [-l "0 2 5"] [-o "write read send"] [-s SCALE] NAME=BINARY...
#
# A loss rate of "tbf" is a rate mismatch instead of random loss: the bridge port
# towards the side the data goes to (B for write and send, A for read) is a tbf of
# TBF_RATE (default 100mbit: a tenth of what the engine sends here) with a shallow
# queue (TBF_LIMIT bytes, default 30000: about 28 frames), and the row's ratio is to
# that rate in MiB/s (100 Mbit/s: 11.92 MiB/s) rather than to the lossless row.
#
# KEEP=DIR keeps every run's client and server output there.
set -euo pipefail
passes=3 losses="0 2 5" ops="write read send" scale=1
while getopts "p:l:o:s:" o; do
	case $o in
	p) passes=$OPTARG ;;
	l) losses=$OPTARG ;;
	o) ops=$OPTARG ;;
	s) scale=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "usage: $0 [-p PASSES] [-l LOSSES] [-o OPS] [-s SCALE] NAME=BINARY..." >&2; exit 2; }
[ -n "${losses// /}" ] || { echo "$0: -l '': want at least one loss rate (0 to 99, or tbf)" >&2; exit 2; }
[ -n "${ops// /}" ] || { echo "$0: -o '': want at least one of write, read, send" >&2; exit 2; }
for l in $losses; do
	[[ $l == tbf || ($l =~ ^[0-9]+$ && $l -lt 100) ]] || { echo "$0: -l $l: want loss rates in per cent from 0 to 99, or tbf" >&2; exit 2; }
done
for o in $ops; do
	[[ $o == write || $o == read || $o == send ]] || { echo "$0: -o $o: want write, read or send" >&2; exit 2; }
done
[[ $passes =~ ^[1-9][0-9]*$ ]] || { echo "$0: -p $passes: want a number of passes, at least 1" >&2; exit 2; }
[[ $scale =~ ^[0-9]*\.?[0-9]+$ ]] || { echo "$0: -s $scale: want a scale of 0 or more, e.g. 0.5 (each row runs at least 4 messages)" >&2; exit 2; }
[[ ${TBF_RATE:-100mbit} =~ ^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit)$ ]] || { echo "$0: TBF_RATE=$TBF_RATE: want a rate such as 100mbit (bit, kbit, mbit or gbit)" >&2; exit 2; }
[[ ${TBF_LIMIT:-30000} =~ ^[1-9][0-9]*$ ]] || { echo "$0: TBF_LIMIT=$TBF_LIMIT: want the queue's size in bytes, e.g. 30000" >&2; exit 2; }
for nb in "$@"; do
	b=${nb#*=}
	[[ $nb == *=* && -n ${nb%%=*} && -x $b && -f $b ]] || { echo "$0: $nb: want NAME=BINARY with an executable xroce binary" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "$0 needs root" >&2; exit 1; }
command -v nft >/dev/null || { echo "$0 needs nftables (apt-get install -y nftables)" >&2; exit 1; }

# shellcheck source=test/scripts/bridge.sh
source "$(dirname "$0")/bridge.sh" 10.98.0
ip netns exec "$M" nft add table bridge chaos
ip netns exec "$M" nft add chain bridge chaos fw '{ type filter hook forward priority 0; }'

# iters is -n for a loss rate: 300 messages without loss, 75 at 2 %, 30 at 5 %, 20
# through the tbf (times -s, between 4 and 1024): the fixed window's goodput at 5 %
# is a few MiB/s.
iters() {
	awk -v l="$1" -v s="$scale" 'BEGIN { n = (l == "tbf") ? 20 : (l == 0) ? 300 : 150 / l; n = int(n * s); print (n < 4) ? 4 : (n > 1024) ? 1024 : n }'
}
tbf_rate=${TBF_RATE:-100mbit} tbf_limit=${TBF_LIMIT:-30000}
# tbf_mibs: TBF_RATE in MiB/s (e.g. 100mbit: 11.92)
tbf_mibs=$(awk -v r="$tbf_rate" 'BEGIN { n = r + 0; u = tolower(r); sub(/^[0-9.]+/, "", u); f = (u == "gbit") ? 1e9 : (u == "mbit") ? 1e6 : (u == "kbit") ? 1e3 : 1; printf "%.2f", n * f / 8 / 1048576 }')

declare -A bw
fault() { [ "$1" = tbf ] && echo tbf || echo "$1%"; } # a loss rate as the lines print it
run() { # name binary op loss pass
	local name=$1 bin=$2 op=$3 loss=$4 pass=$5 args v ok rc
	args=("${op}_bw" -s 1048576 -m 1024 -n "$(iters "$loss")" "${VERIFY:---verify-all}" --counters)
	timeout 400 ip netns exec "$B" "$bin" "${args[@]}" -d "$VB" >"$tmp/srv" 2>&1 &
	srv=$!
	# The server is ready when it says so (an AF_XDP queue the last run's process
	# still held can take it a few seconds).
	for _ in $(seq 600); do
		grep -q "Waiting for client" "$tmp/srv" 2>/dev/null && break
		kill -0 "$srv" 2>/dev/null || break
		sleep 0.05
	done
	ok=1 rc=0
	for _ in 1 2 3; do # a server that printed its banner may not listen yet
		rc=0
		timeout 300 ip netns exec "$A" "$bin" "${args[@]}" -d "$VA" 10.98.0.2 >"$tmp/cli" 2>&1 || rc=$?
		[ "$rc" != 0 ] && grep -q "refused the connection" "$tmp/cli" || break
		sleep 1
	done
	if [ "$rc" != 0 ]; then
		ok=0
		echo "!! $name $op $(fault "$loss"): client failed:" >&2
		tail -5 "$tmp/cli" >&2
		sleep 2
		kill "$srv" 2>/dev/null || true
	fi
	if ! wait "$srv"; then
		ok=0
		echo "!! $name $op $(fault "$loss"): server failed:" >&2
		tail -5 "$tmp/srv" >&2
	fi
	srv=
	if [ -n "${KEEP:-}" ]; then
		cp "$tmp/cli" "$KEEP/$name-$op-$loss-$pass-client.txt"
		cp "$tmp/srv" "$KEEP/$name-$op-$loss-$pass-server.txt"
	fi
	# The client's summary line: #bytes #iterations BW-peak BW-average MsgRate.
	v=$(awk '$1 == 1048576 && NF == 5 { l = $4 } END { print l }' "$tmp/cli")
	[ "$ok" = 1 ] && [ -n "$v" ] || v=FAILED
	bw[$name,$op,$loss]="${bw[$name,$op,$loss]:-} $v"
	printf '[pass %d] %-8s %-5s %4s  %8s MiB/s  %s\n' "$pass" "$name" "$op" "$(fault "$loss")" "$v" \
		"$(grep -h -o 'verified: .*' "$tmp/cli" "$tmp/srv" | head -1)"
	# The requester's retransmission counters (the client is the requester of every test).
	awk '/Counters/ { f = 1; next }
		f && NF == 2 && $1 ~ /^(sent_pkts|rcvd_seq_err|implied_nak|local_ack_timeout_err|roce_adp_retrans|roce_slow_restart|completer_retry_err)$/ { printf "%s=%s ", $1, $2 }
		END { print "" }' "$tmp/cli" | sed 's/^/           client: /'
}

for pass in $(seq "$passes"); do
	for op in $ops; do
		for loss in $losses; do
			ip netns exec "$M" nft flush chain bridge chaos fw
			for p in "$PA" "$PB"; do tc -n "$M" qdisc del dev "$p" root 2>/dev/null || true; done
			if [ "$loss" = tbf ]; then
				port=$PB
				[ "$op" = read ] && port=$PA
				tc -n "$M" qdisc add dev "$port" root tbf rate "$tbf_rate" burst 32k limit "$tbf_limit"
			elif [ "$loss" != 0 ]; then
				ip netns exec "$M" nft add rule bridge chaos fw udp dport 4791 numgen random mod 100 '<' "$loss" drop
			fi
			for nb in "$@"; do
				run "${nb%%=*}" "${nb#*=}" "$op" "$loss" "$pass"
			done
		done
	done
done

# median of the numbers in $1 (FAILED if none)
median() {
	tr ' ' '\n' <<<"$1" | { grep -E '^[0-9.]+$' || true; } | sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "FAILED"; else if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

echo
echo "Medians of $passes passes, MiB/s (ratio to the lossless row of the same binary):"
echo
printf '| operation | loss |'
for nb in "$@"; do printf ' %s |' "${nb%%=*}"; done
echo
printf '| --- | --- |'
for _ in "$@"; do printf ' --- |'; done
echo
for op in $ops; do
	for loss in $losses; do
		if [ "$loss" = tbf ]; then
			printf '| %s 1 MiB | tbf %s (share of %s MiB/s) |' "${op^^}" "$tbf_rate" "$tbf_mibs"
		else
			printf '| %s 1 MiB | %s %% |' "${op^^}" "$loss"
		fi
		for nb in "$@"; do
			name=${nb%%=*}
			v=$(median "${bw[$name,$op,$loss]}")
			base=$(median "${bw[$name,$op,0]:-}")
			[ "$loss" = tbf ] && base=$tbf_mibs
			if [ "$loss" != 0 ] && [ "$v" != FAILED ] && [ "$base" != FAILED ]; then
				printf ' %s (%s %%) |' "$v" "$(awk -v a="$v" -v b="$base" 'BEGIN { printf "%.0f", 100 * a / b }')"
			else
				printf ' %s |' "$v"
			fi
		done
		echo
	done
done
