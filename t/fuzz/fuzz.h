/*
 * The libFuzzer entry points every fuzz target defines (t/fuzz/fuzz_*.c).
 * Built two ways: by clang with -fsanitize=fuzzer for the fuzzing runs
 * (t/fuzz/fuzz.mk: make fuzz, make fuzz-smoke), and by the project's own
 * compiler with t/fuzz/replay.c as main(), which replays the target's corpus
 * in the tree (t/fuzz/corpus/NAME) as a test of `make check`: every input
 * that once found a bug stays a regression test in both.
 *
 * A target checks what must hold for every input and calls FUZZ_ASSERT,
 * which aborts (a crash libFuzzer reports, with the input) when it does not.
 */
#ifndef SG_FUZZ_H
#define SG_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(cond) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
			abort(); \
		} \
	} while (0)

/* Reads input as a sequence of choices: bytes are taken from the front
 * while they last, then zeros. */
struct fuzz_in {
	const uint8_t *p;
	size_t n;
};

static inline unsigned fuzz_byte(struct fuzz_in *in)
{
	if (in->n == 0)
		return 0;
	in->n--;
	return *in->p++;
}

#endif
