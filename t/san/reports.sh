#!/bin/sh
# t/san/reports.sh TOOL DIR - the end of make check-tsan / check-valgrind-ci:
# every non-empty file in DIR is a report of TOOL (ThreadSanitizer's
# log_path, valgrind's --log-file: one file per process, written only when
# there is something to say with -q).  Prints each one; exit status 1 if
# there is any, so a report fails the run even when the test that caused it
# passed (a report from a sandgate that a test started, or from a process
# that ended after its test's last check).
tool=$1
dir=$2
n=0
for f in "$dir"/*; do
	[ -s "$f" ] || continue
	# valgrind's own notes ("--PID-- WARNING: unhandled syscall" for a
	# syscall it does not know, which then fails with ENOSYS and the code's
	# fallback runs) are not reports: its errors are "==PID==" lines.
	if [ "$tool" = valgrind ] && ! grep -q '^==[0-9]*==' "$f"; then
		continue
	fi
	n=$((n + 1))
	echo "==== $tool report: $f"
	head -n 200 "$f"
done
if [ "$n" -gt 0 ]; then
	echo "$tool: $n report(s) in $dir"
	exit 1
fi
echo "$tool: no report"
