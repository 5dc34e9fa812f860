/*
 * Unit tests for the edit engine (core/tools/patch.c): exact and whitespace-tolerant
 * replace, ambiguity errors with line numbers, replace_all, CRLF files, and
 * unified diffs applied by sandgate itself: plain, offset, tolerant, new
 * files, and a hunk that does not apply.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/tools/patch.h"

static void replace_ok(const char *text, const char *old_s, const char *new_s, bool all,
		       const char *want, unsigned matches, const char *strategy)
{
	struct sg_patch_out o;
	struct sg_err err = { 0 };

	assert_int_equal(sg_patch_replace(text, strlen(text), old_s, new_s, all, &o, &err), 0);
	assert_string_equal(o.text, want);
	assert_int_equal(o.len, strlen(want));
	assert_int_equal(o.matches, matches);
	assert_string_equal(o.strategy, strategy);
	sg_patch_out_free(&o);
}

static void test_exact(void **state)
{
	(void)state;
	replace_ok("hello world\nbye\n", "world", "there", false, "hello there\nbye\n", 1, "exact");
	replace_ok("a\nb\nc", "b\nc", "B\nC", false, "a\nB\nC", 1, "exact");
	/* no final newline is kept as it is */
	replace_ok("x = 1", "1", "2", false, "x = 2", 1, "exact");
}

static void test_whitespace_tolerant(void **state)
{
	(void)state;
	/* trailing spaces in the file */
	replace_ok("def f():   \n    return 1\n", "def f():\n    return 1\n",
		   "def f():\n    return 2\n", false, "def f():\n    return 2\n", 1,
		   "trailing-whitespace");
	/* other indentation: the replacement is re-indented to the file's */
	replace_ok("class A:\n    def f(self):\n        return 1\n\nx = 1\n",
		   "def f(self):\n    return 1", "def f(self):\n    return 2\n    # done",
		   false, "class A:\n    def f(self):\n        return 2\n        # done\n\nx = 1\n", 1,
		   "whitespace");
	/* runs of whitespace inside the line */
	replace_ok("if (a  &&\tb) {\n\tgo();\n}\n", "if (a && b) {\n    go();", "if (a) {\n    stop();",
		   false, "if (a) {\n\tstop();\n}\n", 1, "whitespace");
}

static void test_ambiguous(void **state)
{
	struct sg_patch_out o;
	struct sg_err err = { 0 };
	const char *text = "x = 1\ny = 2\nx = 1\nz\nx = 1\n";

	(void)state;
	assert_int_equal(sg_patch_replace(text, strlen(text), "x = 1", "x = 9", false, &o, &err), -1);
	assert_int_equal(err.code, SG_E_INVAL);
	assert_non_null(strstr(err.msg, "3 places"));
	assert_non_null(strstr(err.msg, "lines 1, 3 and 5"));
	assert_non_null(strstr(err.msg, "replace_all"));
	/* also when only the tolerant match is ambiguous */
	text = "  a();\nb\n\ta();\n";
	assert_int_equal(sg_patch_replace(text, strlen(text), "a();\n", "c();\n", false, &o, &err), -1);
	assert_non_null(strstr(err.msg, "lines 1 and 3"));
}

static void test_replace_all(void **state)
{
	(void)state;
	replace_ok("x = 1\ny = 2\nx = 1\n", "x = 1", "x = 9", true, "x = 9\ny = 2\nx = 9\n", 2, "exact");
	replace_ok("aaa", "a", "b", true, "bbb", 3, "exact");
}

static void test_not_found_and_bad_args(void **state)
{
	struct sg_patch_out o;
	struct sg_err err = { 0 };

	(void)state;
	assert_int_equal(sg_patch_replace("abc\n", 4, "zzz", "y", false, &o, &err), -1);
	assert_int_equal(err.code, SG_E_NOTFOUND);
	assert_int_equal(sg_patch_replace("abc\n", 4, "", "y", false, &o, &err), -1);
	assert_int_equal(err.code, SG_E_INVAL);
	assert_int_equal(sg_patch_replace("abc\n", 4, "abc", "abc", false, &o, &err), -1);
	assert_int_equal(err.code, SG_E_INVAL);
}

static void test_crlf(void **state)
{
	(void)state;
	replace_ok("one\r\ntwo\r\nthree\r\n", "two\nthree\n", "2\n3\n", false,
		   "one\r\n2\r\n3\r\n", 1, "exact");
}

static void apply_ok(const char *text, const char *diff, const char *want, int offset,
		     unsigned fuzzy)
{
	struct sg_diff *d = NULL;
	struct sg_patch_out o;
	struct sg_err err = { 0 };

	if (sg_diff_parse(diff, &d, &err) < 0)
		fail_msg("parse: %s", err.msg);
	assert_int_equal(d->n, 1);
	if (sg_diff_apply(&d->files[0], text, text ? strlen(text) : 0, &o, &err) < 0)
		fail_msg("apply: %s", err.msg);
	assert_string_equal(o.text, want);
	assert_int_equal(o.max_offset, offset);
	assert_int_equal(o.fuzzy_hunks, fuzzy);
	assert_int_equal(o.matches, d->files[0].n);
	sg_patch_out_free(&o);
	sg_diff_free(d);
}

static void test_diff_plain(void **state)
{
	(void)state;
	apply_ok("a\nb\nc\nd\ne\n",
		 "--- a/f.txt\n+++ b/f.txt\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n",
		 "a\nb\nC\nd\ne\n", 0, 0);
	/* two hunks, the second shifted by the first's added lines */
	apply_ok("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n",
		 "--- a/n\n+++ b/n\n@@ -1,2 +1,4 @@\n 1\n+1.1\n+1.2\n 2\n@@ -8,3 +10,2 @@\n 8\n-9\n 10\n",
		 "1\n1.1\n1.2\n2\n3\n4\n5\n6\n7\n8\n10\n", 0, 0);
}

static void test_diff_offset(void **state)
{
	(void)state;
	/* the hunk says line 2, the text is at line 5 */
	apply_ok("x\ny\nz\na\nb\nc\n", "@@ -2,3 +2,3 @@\n a\n-b\n+B\n c\n", "x\ny\nz\na\nB\nc\n", 2, 0);
	/* whitespace-tolerant context */
	apply_ok("if x:\n    go()  \n    stop()\n", "@@ -1,3 +1,3 @@\n if x:\n     go()\n-    stop()\n+    halt()\n",
		 "if x:\n    go()  \n    halt()\n", 0, 1);
}

static void test_diff_new_file_and_eol(void **state)
{
	(void)state;
	apply_ok(NULL, "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n", "hello\nworld\n", 0, 0);
	apply_ok("a\nb", "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n",
		 "a\nc", 0, 0);
}

static void test_diff_failing_hunk(void **state)
{
	struct sg_diff *d = NULL;
	struct sg_patch_out o;
	struct sg_err err = { 0 };
	const char *diff = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n@@ -5,2 +5,2 @@\n nothere\n-q\n+Q\n";

	(void)state;
	assert_int_equal(sg_diff_parse(diff, &d, &err), 0);
	assert_int_equal(d->files[0].n, 2);
	assert_string_equal(sg_diff_target(&d->files[0]), "f");
	assert_int_equal(sg_diff_apply(&d->files[0], "a\nb\nc\n", 6, &o, &err), -1);
	assert_int_equal(err.code, SG_E_NOTFOUND);
	assert_non_null(strstr(err.msg, "hunk 2 of 2"));
	assert_non_null(strstr(err.msg, "@@ -5,2 +5,2 @@"));
	sg_diff_free(d);
	assert_int_equal(sg_diff_parse("just prose\n", &d, &err), -1);
	assert_int_equal(err.code, SG_E_INVAL);
	assert_int_equal(sg_diff_parse("@@ -x +1 @@\n+a\n", &d, &err), -1);
	assert_non_null(strstr(err.msg, "line 1"));
	/* Line numbers past 100 million: refused, not added up past a long's
	 * range (found by t/fuzz/fuzz_patch.c: signed overflow) */
	assert_int_equal(sg_diff_parse("@@ -9223372036854775807,1 +1,1 @@\n-a\n+b\n", &d, &err), -1);
	assert_non_null(strstr(err.msg, "line numbers and counts from 0 to 100000000"));
	assert_int_equal(sg_diff_parse("@@ -1,100000001 +1 @@\n-a\n", &d, &err), -1);
	assert_int_equal(sg_diff_parse("@@ -1,-1 +1 @@\n-a\n", &d, &err), -1);
	assert_int_equal(sg_diff_parse("@@ - 1 +1 @@\n-a\n", &d, &err), -1);
	assert_int_equal(sg_diff_parse("@@ -100000000,0 +1,1 @@\n+a\n", &d, &err), 0);
	{
		struct sg_patch_out o2;

		/* far past the end: appended, the offset in range */
		assert_int_equal(sg_diff_apply(&d->files[0], "x\n", 2, &o2, &err), 0);
		assert_string_equal(o2.text, "x\na\n");
		assert_int_equal(o2.max_offset, 100000000 - 1);
		sg_patch_out_free(&o2);
	}
	sg_diff_free(d);
}

static void test_diff_multi_file(void **state)
{
	struct sg_diff *d = NULL;
	struct sg_err err = { 0 };
	const char *diff =
		"diff --git a/one b/one\nindex 1..2 100644\n--- a/one\n+++ b/one\n@@ -1 +1 @@\n-x\n+y\n"
		"diff --git a/two b/two\n--- a/two\n+++ b/two\n@@ -1,2 +1,2 @@\n--- dashes\n+++ plus\n keep\n";

	(void)state;
	assert_int_equal(sg_diff_parse(diff, &d, &err), 0);
	assert_int_equal(d->n, 2);
	assert_string_equal(sg_diff_target(&d->files[1]), "two");
	/* a removed line "-- dashes" and an added "++ plus" inside the hunk */
	assert_int_equal(d->files[1].hunks[0].n, 3);
	assert_string_equal(d->files[1].hunks[0].lines[0], "--- dashes");
	sg_diff_free(d);
}

static void test_unified_writer(void **state)
{
	char *u;

	(void)state;
	u = sg_patch_unified("a\nb\nc\n", 6, "a\nB\nc\n", 6, "/w/f.txt", 100);
	assert_string_equal(u, "--- a/w/f.txt\n+++ b/w/f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n");
	free(u);
	u = sg_patch_unified("same\n", 5, "same\n", 5, "f", 100);
	assert_string_equal(u, "");
	free(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact),
		cmocka_unit_test(test_whitespace_tolerant),
		cmocka_unit_test(test_ambiguous),
		cmocka_unit_test(test_replace_all),
		cmocka_unit_test(test_not_found_and_bad_args),
		cmocka_unit_test(test_crlf),
		cmocka_unit_test(test_diff_plain),
		cmocka_unit_test(test_diff_offset),
		cmocka_unit_test(test_diff_new_file_and_eol),
		cmocka_unit_test(test_diff_failing_hunk),
		cmocka_unit_test(test_diff_multi_file),
		cmocka_unit_test(test_unified_writer),
	};

	return cmocka_run_group_tests_name("patch", tests, NULL, NULL);
}
