#!/usr/bin/env bash
# test/scripts/fuzz-long.sh: every fuzz target of every package for up to EXECS
# executions or SECONDS seconds, whichever comes first, one worker each, and a table
# of the executions each reached (issue 16: 10^7 per decoder target). A target that
# finds a crash stops the run with go's report and the failing input in testdata/.
#
#   test/scripts/fuzz-long.sh [-n EXECS] [-t SECONDS] [-o TABLE.md]
#
# The count is go's own ("execs: N" in its progress lines); a target stopped by the
# time limit reports the executions it had reached. Run from the repository root.
set -euo pipefail
execs=10000000 secs=600 out=""
while getopts "n:t:o:" o; do
	case $o in
	n) execs=$OPTARG ;;
	t) secs=$OPTARG ;;
	o) out=$OPTARG ;;
	*) echo "usage: $0 [-n EXECS] [-t SECONDS] [-o TABLE.md]" >&2; exit 2 ;;
	esac
done
go=${GO:-go}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
table="| package | target | executions | seconds | stopped by |
| --- | --- | --- | --- | --- |"
for pkg in $($go list ./...); do
	for t in $($go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		start=$(date +%s)
		rc=0
		# -fuzztime as a count; timeout sends SIGINT, on which go's fuzzer stops and
		# reports what it reached (a duration can end in "context deadline exceeded").
		timeout -s INT "$secs" $go test "$pkg" -run '^$' -fuzz "^$t\$" -fuzztime "${execs}x" -parallel 1 >"$log" 2>&1 || rc=$?
		took=$(($(date +%s) - start))
		n=$(grep -o 'execs: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
		by="count"
		if [ "$rc" = 124 ] || grep -q 'interrupt' "$log"; then
			by="time"
		elif [ "$rc" != 0 ]; then
			cat "$log"
			echo "fuzz-long: $pkg $t failed" >&2
			exit 1
		fi
		line="| ${pkg#github.com/xroce/xroce/} | $t | ${n:-?} | $took | $by |"
		echo "$line"
		table="$table
$line"
	done
done
if [ -n "$out" ]; then
	printf '%s\n' "$table" >"$out"
fi
