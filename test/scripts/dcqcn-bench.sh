#!/usr/bin/env bash
# test/scripts/dcqcn-bench.sh: what DCQCN does to a bottleneck queue (docs/congestion.md,
# "DCQCN, measured"). xroce write_bw with --cc none and --cc dcqcn, alternating, through
# a bridge whose port towards the receiver is a tbf bottleneck with a shallow queue, and
# whose nftables bridge-family forward chain sets CE on the ECN-capable RoCE frames
# towards the receiver above a rate a little under the bottleneck's (`ip ecn ect0
# limit rate over R ip ecn set ce`: a switch marking as its queue builds).
# Per run: goodput, frames the tbf queue dropped, frames marked CE, the client's
# retransmission and CNP counters and its smoothed RTT (queueing delay included).
# Everything is removed on exit. Needs root, nftables and tc.
#
# -r none: no tbf, only the marks (the sender's rate should settle near the mark
# rate, with no drops). -d PARAMS: --dcqcn PARAMS for the DCQCN runs (mlx5's names,
# e.g. dce_tcp_rtt=55,dce_tcp_g=1020). -D SECONDS: write_bw -s 65536 -D SECONDS
# instead of -n 1 MiB messages, and the rate each second: nftables' limit holds a
# whole second of the rate in its bucket (net/netfilter/nft_limit.c: tokens_max is
# the unit times (rate + burst) / rate), so marks start only after the sender has
# sent a second's worth of the rate beyond it; the "settled" rate is the median of
# the seconds from the third on.
#
#   test/scripts/dcqcn-bench.sh [-p PASSES] [-n MESSAGES] [-D SECONDS] [-r TBF_RATE|none] [-m MARK_RATE] [-q QUEUE_BYTES] [-d PARAMS] BINARY
set -euo pipefail
passes=3 msgs=20 rate=100mbit mark="6 mbytes/second burst 65536 bytes" queue=30000 params= dur=
while getopts "p:n:D:r:m:q:d:" o; do
	case $o in
	p) passes=$OPTARG ;;
	n) msgs=$OPTARG ;;
	r) rate=$OPTARG ;;
	m) mark=$OPTARG ;;
	q) queue=$OPTARG ;;
	d) params=$OPTARG ;;
	D) dur=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[[ -z $dur || $dur =~ ^[1-9][0-9]*$ ]] || { echo "$0: -D $dur: want a whole number of seconds" >&2; exit 2; }
[ $# = 1 ] || { echo "usage: $0 [-p PASSES] [-n MESSAGES] [-D SECONDS] [-r TBF_RATE|none] [-m MARK_RATE] [-q QUEUE_BYTES] [-d PARAMS] BINARY" >&2; exit 2; }
bin=$1
[[ $passes =~ ^[1-9][0-9]*$ ]] || { echo "$0: -p $passes: want a number of passes, at least 1" >&2; exit 2; }
[[ $msgs =~ ^[1-9][0-9]*$ ]] || { echo "$0: -n $msgs: want a number of messages, at least 1" >&2; exit 2; }
[[ -x $bin && -f $bin ]] || { echo "$0: $bin: want an executable xroce binary" >&2; exit 2; }
if [ -n "$params" ]; then # refused flags name --dcqcn before anything opens an interface
	if out=$("$bin" write_bw --cc dcqcn --dcqcn "$params" -d xroce-no-such-if 2>&1) || [[ $out == *--dcqcn* ]]; then
		echo "$0: -d $params: $out" >&2
		exit 2
	fi
fi
[ "$(id -u)" = 0 ] || { echo "$0 needs root" >&2; exit 1; }

# shellcheck source=test/scripts/bridge.sh
source "$(dirname "$0")/bridge.sh" 10.97.0
ip netns exec "$M" nft add table bridge cemark
ip netns exec "$M" nft add chain bridge cemark fw '{ type filter hook forward priority 0; }'
# shellcheck disable=SC2086 # the mark rate is several words
ip netns exec "$M" nft add rule bridge cemark fw ip daddr 10.97.0.2 udp dport 4791 ip ecn ect0 limit rate over $mark counter ip ecn set ce

[ "$rate" = none ] || tc -n "$M" qdisc replace dev "$PB" root tbf rate "$rate" burst 32k limit "$queue"
# drops: what the port's qdisc dropped (the tbf, or the default qdisc without one)
drops() { tc -n "$M" -s qdisc show dev "$PB" | awk '/dropped/ { sub(",", "", $7); print $7; exit }'; }
marks() { ip netns exec "$M" nft list chain bridge cemark fw | awk '/counter packets/ { for (i = 1; i < NF; i++) if ($i == "packets") print $(i + 1) }'; }

declare -A res
failed=0
run() { # cc pass: the counters are cumulative, a run's are the differences
	local cc=$1 pass=$2 args v drops marks d0 m0
	d0=$(drops) m0=$(marks)
	args=(write_bw -s 1048576 -m 1024 -n "$msgs" --verify --counters --cc "$cc")
	[ -z "$dur" ] || args=(write_bw -s 65536 -m 1024 -D "$dur" --counters --cc "$cc")
	[ "$cc" = none ] || [ -z "$params" ] || args+=(--dcqcn "$params")
	timeout 300 ip netns exec "$B" "$bin" "${args[@]}" -d "$VB" >"$tmp/srv" 2>&1 &
	srv=$!
	for _ in $(seq 600); do
		grep -q "Waiting for client" "$tmp/srv" 2>/dev/null && break
		kill -0 "$srv" 2>/dev/null || break # the server ended: its error is below
		sleep 0.05
	done
	sleep 0.2
	timeout 300 ip netns exec "$A" "$bin" "${args[@]}" -d "$VA" 10.97.0.2 >"$tmp/cli" 2>&1 || { echo "!! client failed: $(tail -3 "$tmp/cli")" >&2; failed=1; }
	wait "$srv" || { echo "!! server failed: $(tail -3 "$tmp/srv")" >&2; failed=1; }
	srv=
	v=$(awk '$1 == 1048576 && NF == 5 { l = $4 } END { print l }' "$tmp/cli")
	[ -z "$dur" ] || v=$(awk '$1 == 65536 && NF == 5 { s[n++] = $4 } END { for (i = 2; i < n - 1; i++) printf "%s ", s[i]; print "" }' "$tmp/cli" |
		tr ' ' '\n' | sort -n | awk 'NF { a[n++] = $1 } END { if (n) print a[int((n - 1) / 2)] }')
	[ -z "$dur" ] || echo "           each second: $(awk '$1 == 65536 && NF == 5 { s[n++] = $4 } END { for (i = 0; i < n - 1; i++) printf "%s ", s[i] }' "$tmp/cli")MB/s"
	drops=$(($(drops) - d0)) marks=$(($(marks) - m0))
	res[$cc]="${res[$cc]:-} ${v:-FAILED}/$drops"
	printf '[pass %d] --cc %-5s %8s MiB/s  tbf dropped %6s  CE marked %6s  %s\n' "$pass" "$cc" "${v:-FAILED}" "$drops" "$marks" \
		"$(grep -h -o 'verified: [^.]*' "$tmp/cli" "$tmp/srv" | head -1)"
	awk '/Counters/ { f = 1; next }
		f && NF == 2 && $1 ~ /^(sent_pkts|rcvd_seq_err|local_ack_timeout_err|roce_adp_retrans|completer_retry_err|rp_cnp_handled)$/ { printf "%s=%s ", $1, $2 }
		/Window/ { sub(/^ *Window \(QP [^)]*\): */, ""); w = $0 }
		END { print ""; if (w != "") print "           window: " w }' "$tmp/cli" | sed '1s/^/           client: /'
}

for pass in $(seq "$passes"); do
	for cc in none dcqcn; do
		run "$cc" "$pass"
	done
done
echo
echo "MiB/s/tbf drops per pass: none:${res[none]}  dcqcn:${res[dcqcn]}"
exit "$failed"
