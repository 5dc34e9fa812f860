/*
 * Unit tests of plugins/ssh/quote.c: the remote command line.  Each line is
 * run the way sshd runs it, as `$SHELL -c LINE`, through the local sh, dash
 * and bash (whichever exist), and what the command saw is compared byte for
 * byte: arguments quoted exactly once and never re-split, the marker line,
 * the working directory, the env(1) prefix.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "plugins/ssh/ssh.h"
#include "t/lib/fakehost.h"

/* ---- a fake host: only the buffer functions are used -------------------------- */

static const struct sg_host_api host = {
	.size = sizeof(struct sg_host_api),
	.buf_append = sg_buf_append,
	.buf_release = sg_buf_release,
};

/* Runs `shell -c line` with stdin from /dev/null; returns its stdout. */
static char *run_shell(const char *shell, const char *line, int *status)
{
	int pfd[2];
	pid_t pid;
	struct sg_buf out = { 0 };
	char buf[4096];
	ssize_t n;

	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		freopen("/dev/null", "r", stdin);
		execl(shell, shell, "-c", line, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	while ((n = read(pfd[0], buf, sizeof(buf))) > 0)
		sg_buf_append(&out, buf, (size_t)n);
	close(pfd[0]);
	waitpid(pid, status, 0);
	if (!out.data)
		sg_buf_append(&out, "", 0);
	return out.data;
}

static const char *const shells[] = { "/bin/sh", "/bin/dash", "/bin/bash", "/usr/bin/zsh", "/usr/bin/fish" };

static const char *const nasty[] = {
	"",
	"plain",
	"two words",
	"it's",
	"'",
	"''",
	"\\",
	"\\\\",
	"a\\'b",
	"\"double\" $HOME `id` $(id) ${x} !bang",
	"new\nline",
	"tab\there",
	"glob * ? [a]",
	"ünïcødé ✓ — 日本",
	"trailing backslash \\",
	"-n",
	"--",
	"; rm -rf / #",
};

static void test_quote_roundtrip(void **state)
{
	(void)state;
	for (size_t si = 0; si < sizeof(shells) / sizeof(shells[0]); si++) {
		if (access(shells[si], X_OK) != 0)
			continue;
		for (size_t i = 0; i < sizeof(nasty) / sizeof(nasty[0]); i++) {
			struct sg_buf line = { 0 };
			char *got;
			int st;

			sg_buf_append(&line, "printf '%s' ", 12);
			assert_int_equal(ssh_quote(&host, &line, nasty[i]), 0);
			got = run_shell(shells[si], line.data, &st);
			if (strcmp(got, nasty[i]) != 0)
				fail_msg("%s: quoting '%s' gave '%s' (line %s)", shells[si], nasty[i], got, line.data);
			free(got);
			sg_buf_release(&line);
		}
	}
}

/* The whole line: marker first, then what the command printed. */
static void check_line(const char *shell, const struct ssh_cmdspec *spec, const char *want_out)
{
	struct sg_buf line = { 0 };
	char *got, *nl;
	int st;

	assert_int_equal(ssh_cmdline(&host, spec, &line), 0);
	got = run_shell(shell, line.data, &st);
	nl = strchr(got, '\n');
	if (!nl || strncmp(got, "N0NCE ", 6) != 0 || atol(got + 6) <= 1)
		fail_msg("%s: no marker line in '%s'", shell, got);
	if (strcmp(nl + 1, want_out) != 0)
		fail_msg("%s: got '%s', want '%s' (line %s)", shell, nl + 1, want_out, line.data);
	free(got);
	sg_buf_release(&line);
}

static void test_cmdline_command(void **state)
{
	struct ssh_cmdspec spec = { .command = "printf '%s|' \"$0\" \"$PWD\"; printf '%s' 'it'\\''s'",
				    .cwd = "/tmp", .nonce = "N0NCE" };

	(void)state;
	for (size_t si = 0; si < sizeof(shells) / sizeof(shells[0]); si++)
		if (access(shells[si], X_OK) == 0)
			check_line(shells[si], &spec, "/bin/sh|/tmp|it's");
}

static void test_cmdline_argv(void **state)
{
	const char *argv[] = { "printf", "[%s]", "a b", "it's", "\\\\", "new\nline", "", NULL };
	struct ssh_cmdspec spec = { .argv = argv, .cwd = "/", .nonce = "N0NCE" };

	(void)state;
	for (size_t si = 0; si < sizeof(shells) / sizeof(shells[0]); si++)
		if (access(shells[si], X_OK) == 0)
			check_line(shells[si], &spec, "[a b][it's][\\\\][new\nline][]");
}

static void test_cmdline_env(void **state)
{
	const char *env[] = { "FOO=bar baz 'q' \"d\" $x \\", "EMPTY=", NULL };
	struct ssh_cmdspec spec = { .command = "printf '%s|%s|%s' \"$FOO\" \"${EMPTY-unset}\" \"$0\"",
				    .cwd = "/", .env_prefix = env, .nonce = "N0NCE" };

	(void)state;
	check_line("/bin/sh", &spec, "bar baz 'q' \"d\" $x \\||/bin/sh");
}

static void test_cmdline_merged(void **state)
{
	struct ssh_cmdspec spec = { .command = "echo out; echo err >&2", .cwd = "/",
				    .nonce = "N0NCE", .merge_stderr = true };

	(void)state;
	check_line("/bin/sh", &spec, "out\nerr\n");
}

static void test_cmdline_nocwd(void **state)
{
	struct ssh_cmdspec spec = { .command = "echo never", .cwd = "/no/such/dir", .nonce = "N0NCE" };
	struct sg_buf line = { 0 };
	char *got;
	int st;

	(void)state;
	assert_int_equal(ssh_cmdline(&host, &spec, &line), 0);
	got = run_shell("/bin/sh", line.data, &st);
	assert_string_equal(got, "N0NCE cwd\n");
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	free(got);
	sg_buf_release(&line);
}

static void test_env_names(void **state)
{
	(void)state;
	assert_true(ssh_env_name_ok("A=1"));
	assert_true(ssh_env_name_ok("_x9=a=b"));
	assert_true(ssh_env_name_ok("E="));
	assert_false(ssh_env_name_ok("=1"));
	assert_false(ssh_env_name_ok("9A=1"));
	assert_false(ssh_env_name_ok("A-B=1"));
	assert_false(ssh_env_name_ok("A B=1"));
	assert_false(ssh_env_name_ok("NOEQUALS"));
	assert_false(ssh_env_name_ok("-n=1"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quote_roundtrip),
		cmocka_unit_test(test_cmdline_command),
		cmocka_unit_test(test_cmdline_argv),
		cmocka_unit_test(test_cmdline_env),
		cmocka_unit_test(test_cmdline_merged),
		cmocka_unit_test(test_cmdline_nocwd),
		cmocka_unit_test(test_env_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
