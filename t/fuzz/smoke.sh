#!/bin/sh
# t/fuzz/smoke.sh - a short bounded run of every fuzz target (CI: make
# fuzz-smoke, called by t/run-all.sh).  Each target starts from the corpus in
# the tree with a fresh working corpus and runs FUZZ_SMOKE_TIME seconds; it
# passes when it ends without a finding.  Prints "PASS: fuzz NAME" or
# "FAIL: fuzz NAME" (then the end of its log) per target, and writes
# $OUT/../fuzz-smoke.log with automake's "# PASS: N" and "# FAIL: N" lines,
# which t/run-all.sh counts.  Exit status 0 only when every target passed.
#
# Environment: SRC, OUT, FUZZ_TARGETS, FUZZ_SMOKE_TIME (default 5).
set -u
: "${SRC:?}" "${OUT:?}" "${FUZZ_TARGETS:?}"
secs=${FUZZ_SMOKE_TIME:-5}
pass=0
fail=0
summary=$OUT/../fuzz-smoke.log
mkdir -p "$OUT/smoke"
for t in $FUZZ_TARGETS; do
	log=$OUT/smoke/$t.log
	rm -rf "$OUT/smoke/corpus-$t"
	if FUZZ_CORPUS=$OUT/smoke/corpus-$t sh "$SRC/t/fuzz/run.sh" "$t" -max_total_time="$secs" >"$log" 2>&1; then
		pass=$((pass + 1))
		echo "PASS: fuzz $t ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$') runs in $secs s)"
	else
		fail=$((fail + 1))
		echo "FAIL: fuzz $t (log: $log)"
		tail -n 60 "$log"
	fi
done
{
	echo "# TOTAL: $((pass + fail))"
	echo "# PASS:  $pass"
	echo "# FAIL:  $fail"
	echo "# ERROR: 0"
} >"$summary"
cat "$summary"
[ "$fail" -eq 0 ]
