#!/bin/bash
# t/run-all.sh - set the machine up (etc/setup.sh), build sandgate twice and
# run every test, as CI does: the README's test command.
#
#   bash t/run-all.sh
#
# 1. autoreconf -fi
# 2. build-ci/:  ../configure --enable-werror; make -j2; make check; make
#                fuzz-smoke (every libFuzzer target a few seconds, t/fuzz)
# 3. build-ci/: make check-valgrind-ci (the compiled tests, and the
#    concurrency tests with sandgate under memcheck); build-tsan/ (clang,
#    --enable-sanitizer=thread): make check-tsan (the same under
#    ThreadSanitizer).  A report fails the run (doc/sanitizers.md).
# 3b. build-san/: ../configure --enable-werror --enable-sanitizer=address,undefined;
#                make -j2; make check, with ASan/UBSan options that stop at the
#                first report, and every test log searched for sanitizer reports
# 4. the logs of failed tests are printed, and the last line is
#    "N passed, N failed": the PASS and FAIL/ERROR/XPASS counts of automake's
#    test-suite.log files added up (plus one failure per broken build step).
# Exit status 0 only when nothing failed.
#
# Both builds are out of tree, so an in-tree configuration (config.status in
# the source directory) is removed first with `make distclean`.  The build
# directories are kept between runs: a re-run only rebuilds what changed.
#
# etc/setup.sh provides everything the tests need: the Debian packages, a
# running Docker engine, the image sandgate/base:1 and the Node packages of
# t/package.json and t/*/package.json.
# Environment: SG_JOBS (default 2), SG_CHECK_TIMEOUT (seconds per make check,
# default 2400), SG_SAN_TIMEOUT (seconds per valgrind or TSan stage, default
# 900), SG_SKIP_SAN=1 (only the plain build, for quick local runs).
set -euo pipefail

cd "$(dirname "$0")/.."
top=$PWD
jobs=${SG_JOBS:-2}
check_timeout=${SG_CHECK_TIMEOUT:-2400}
san_timeout=${SG_SAN_TIMEOUT:-900}
passed=0
failed=0
declare -a problems=()

say() { printf '\n==== %s\n' "$*"; }

problem() {
	problems+=("$1")
	failed=$((failed + 1))
	printf '**** FAILED: %s\n' "$1"
}


node_deps() {
	local pj
	for pj in "$top"/t/package.json "$top"/t/*/package.json; do
		[ -f "$pj" ] || continue
		npm_deps "$(dirname "$pj")" || problem "installing the Node packages of ${pj#"$top"/}"
	done
}

# Adds the counts of one build directory's test-suite.log to the totals.
count() {
	local dir=$1 f p fl er xp
	f=$dir/${2:-test-suite.log}
	if [ ! -f "$f" ]; then
		problem "$dir: no test-suite.log (make check did not run the tests)"
		return
	fi
	p=$(sed -n 's/^# PASS: *//p' "$f" | head -n 1)
	fl=$(sed -n 's/^# FAIL: *//p' "$f" | head -n 1)
	er=$(sed -n 's/^# ERROR: *//p' "$f" | head -n 1)
	xp=$(sed -n 's/^# XPASS: *//p' "$f" | head -n 1)
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${fl:-0} + ${er:-0} + ${xp:-0}))
	printf '%s: %s passed, %s failed, %s errors\n' "$dir" "${p:-0}" "${fl:-0}" "${er:-0}"
}

# Prints the log of every test whose result is not PASS/SKIP/XFAIL.
show_failed_logs() {
	local dir=$1 trs log n since=${2:-$1/.check-start}
	while IFS= read -r trs; do
		if grep -Eq '^:global-test-result: (FAIL|ERROR|XPASS)' "$trs"; then
			log=${trs%.trs}.log
			n=$(wc -l <"$log" 2>/dev/null || echo 0)
			say "log of the failed test ${log#"$top"/} ($n lines)"
			if [ "$n" -gt 3000 ]; then
				head -n 1000 "$log"
				printf '\n... %s lines left out ...\n\n' $((n - 2000))
				tail -n 1000 "$log"
			else
				cat "$log"
			fi
		fi
	done < <(find "$dir" -name '*.trs' -newer "$since" 2>/dev/null | sort)
}

# Sanitizer reports anywhere in the test logs fail the run.
grep_sanitizers() {
	local dir=$1 hits f
	[ -f "$dir/.check-start" ] || return 0
	hits=$(find "$dir" -name '*.log' -newer "$dir/.check-start" ! -name test-suite.log ! -name config.log \
		-exec grep -lE 'ERROR: AddressSanitizer|runtime error:|LeakSanitizer' {} + 2>/dev/null || true)
	for f in $hits; do
		problem "sanitizer report in ${f#"$top"/}"
		grep -nE -A 30 'ERROR: AddressSanitizer|runtime error:|LeakSanitizer' "$f" | head -n 80
	done
}

# build NAME CONFIGURE-ARGS...
build() {
	local name=$1 dir="$top/$1"
	shift
	say "$name: configure $*"
	mkdir -p "$dir"
	rm -f "$dir/.check-start" "$dir/test-suite.log"
	if ! (cd "$dir" && ../configure "$@" >configure.out 2>&1); then
		tail -n 40 "$dir/configure.out"
		problem "$name: configure"
		return 1
	fi
	say "$name: make -j$jobs"
	if ! make -C "$dir" -j"$jobs"; then
		problem "$name: make"
		return 1
	fi
	say "$name: make check"
	# build the test programs in parallel, then run the tests one at a time
	# (the end-to-end tests measure timings against one Docker engine)
	if ! make -C "$dir" -j"$jobs" check TESTS= >/dev/null; then
		make -C "$dir" check TESTS= || true
		problem "$name: building the test programs"
		return 1
	fi
	rm -f "$dir/test-suite.log"
	touch "$dir/.check-start"
	local rc=0
	timeout -k 30 "$check_timeout" make -C "$dir" check || rc=$?
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		problem "$name: make check did not finish within $check_timeout s"
	fi
	local before=$failed
	count "$dir"
	if [ "$rc" -ne 0 ]; then
		show_failed_logs "$dir"
		if [ "$failed" -eq "$before" ]; then
			problem "$name: make check exited $rc"
		fi
	fi
	return 0
}

# configure_build NAME CONFIGURE-ARGS...: configure and make, no tests.
configure_build() {
	local name=$1 dir="$top/$1"
	shift
	say "$name: configure $*"
	mkdir -p "$dir"
	if ! (cd "$dir" && ../configure "$@" >configure.out 2>&1); then
		tail -n 40 "$dir/configure.out"
		problem "$name: configure"
		return 1
	fi
	say "$name: make -j$jobs (and the test programs)"
	# The test programs too (make check with no test): the stage's timer
	# then counts the tests alone.
	if ! make -C "$dir" -j"$jobs" >/dev/null || ! make -C "$dir" -j"$jobs" check TESTS= >/dev/null; then
		make -C "$dir" || true
		problem "$name: make"
		return 1
	fi
}

# san_stage DIR TARGET LOG: make TARGET (check-valgrind-ci, check-tsan) in a
# built DIR; its tests are counted from LOG, and a report that failed no test
# (the target's own check of the reports folder) is a failure of its own.
san_stage() {
	local name=$1 dir="$top/$1" target=$2 log=$3 rc=0 before t0=$SECONDS
	[ -f "$dir/Makefile" ] || return 0
	say "$name: make $target"
	rm -f "$dir/$log"
	touch "$dir/.san-start"
	[ -f "$dir/.check-start" ] || touch "$dir/.check-start"
	timeout -k 30 "$san_timeout" make -C "$dir" "$target" || rc=$?
	before=$failed
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		problem "$name: make $target did not finish within $san_timeout s (SG_SAN_TIMEOUT)"
	fi
	count "$name" "$log"
	if [ "$rc" -ne 0 ]; then
		show_failed_logs "$dir" "$dir/.san-start"
		[ "$failed" -ne "$before" ] || problem "$name: make $target exited $rc (a report: see above)"
	fi
	echo "$name: make $target took $((SECONDS - t0)) s"
}

started=$SECONDS
say "etc/setup.sh: packages, Docker engine, image, Node packages"
if ! bash etc/setup.sh; then
	echo "0 passed, 1 failed"
	exit 1
fi

say "autoreconf -fi"
if [ -f config.status ]; then
	echo "the source directory is configured in-tree: make distclean, so out-of-tree builds can configure"
	make distclean >/dev/null 2>&1 || rm -f config.status
fi
if ! autoreconf -fi; then
	problem "autoreconf"
else
	build build-ci --enable-werror || true
	# The end-to-end tests again with docker.so's in-sandbox runner off, so
	# the plain-exec fallback passes them too.
	if [ -f build-ci/.check-start ]; then
		say "build-ci: make check-fallback (runner off)"
		rm -f build-ci/test-suite-fallback.log
		rc=0
		timeout -k 30 "$check_timeout" make -C build-ci check-fallback || rc=$?
		count build-ci test-suite-fallback.log
		[ "$rc" -eq 0 ] || show_failed_logs build-ci
	fi

	# Every fuzz target a few seconds from its corpus (clang, libFuzzer):
	# each one is a test, counted from fuzz-smoke.log.
	if [ -f build-ci/Makefile ]; then
		say "build-ci: make fuzz-smoke"
		rm -f build-ci/fuzz-smoke.log
		rc=0
		make -C build-ci -j"$jobs" fuzz-smoke || rc=$?
		if [ -f build-ci/fuzz-smoke.log ]; then
			count build-ci fuzz-smoke.log
		else
			problem "build-ci: make fuzz-smoke (the fuzz targets did not build)"
		fi
	fi

	if [ "${SG_SKIP_SAN:-0}" != 1 ]; then
		# The compiled tests and the concurrency tests under valgrind
		# (build-ci) and ThreadSanitizer (build-tsan, clang): any report fails
		# the run (doc/sanitizers.md).
		san_stage build-ci check-valgrind-ci test-suite-valgrind-ci.log
		if configure_build build-tsan CC=clang --enable-werror --enable-sanitizer=thread; then
			san_stage build-tsan check-tsan test-suite-tsan.log
		fi

		export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1
		export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
		build build-san --enable-werror --enable-sanitizer=address,undefined || true
		grep_sanitizers "$top/build-san"
		unset ASAN_OPTIONS UBSAN_OPTIONS
	fi
fi

say "summary ($((SECONDS - started)) s)"
for p in "${problems[@]}"; do printf '  failed: %s\n' "$p"; done
for d in build-ci build-tsan build-san; do
	[ -f "$d/.check-start" ] || continue
	find "$d" -name '*.trs' -newer "$d/.check-start" 2>/dev/null | sort | while IFS= read -r trs; do
		grep -Eq '^:global-test-result: (FAIL|ERROR|XPASS)' "$trs" || continue
		grep -E '^(FAIL|ERROR|XPASS): ' "${trs%.trs}.log" | sed "s|^|  $d: |" || true
	done || true
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
