#!/bin/sh
# t/fuzz/run.sh NAME [libFuzzer options...] - runs one fuzz target, niced
# (the machine is shared), on its working corpus $OUT/corpus/NAME (new
# inputs go there) and the corpus in the tree, t/fuzz/corpus/NAME (read
# only).  A crash, leak, sanitizer report or broken invariant leaves the
# input in $OUT/artifacts/NAME-* and exits non-zero.
#
# Environment: SRC (source tree), OUT (the build's fuzz folder),
# FUZZ_CORPUS (working corpus folder, default $OUT/corpus/NAME),
# ASAN_OPTIONS (default below).
set -eu
name=$1
shift
: "${SRC:?}" "${OUT:?}"
bin=$OUT/fuzz_$name
corpus=${FUZZ_CORPUS:-$OUT/corpus/$name}
[ -x "$bin" ] || { echo "t/fuzz/run.sh: $bin is not built: run make fuzz-build" >&2; exit 2; }
mkdir -p "$corpus" "$OUT/artifacts"
# A smaller quarantine than ASan's 256 MB: page faults cost much in a VM and
# halve the speed; a use after free is still seen within 16 MB of frees.
export ASAN_OPTIONS="${ASAN_OPTIONS:-quarantine_size_mb=16:malloc_context_size=10}"
set -- -artifact_prefix="$OUT/artifacts/$name-" -timeout=25 -print_final_stats=1 "$@"
[ -f "$SRC/t/fuzz/$name.dict" ] && set -- -dict="$SRC/t/fuzz/$name.dict" "$@"
# t/fuzz/NAME.options: the target's own libFuzzer options (one line)
[ -f "$SRC/t/fuzz/$name.options" ] && set -- $(cat "$SRC/t/fuzz/$name.options") "$@"
exec nice -n 19 "$bin" "$@" "$corpus" "$SRC/t/fuzz/corpus/$name"
