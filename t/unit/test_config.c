/*
 * Unit tests for configuration (core/base/conf.c): precedence (default < file <
 * a key's seed variable < SANDGATE_<SECTION>_<KEY> < --set), the environment
 * name mapping, where a value came from, validation (unknown names warn, bad
 * values stop with file, line, key and what is accepted, secrets in files
 * others can read are refused), and prefix iteration.
 *
 * INI files are written with mkstemp() in $TMPDIR.  Every test starts from
 * sg_config_reset() and an environment without the variables it uses.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/base/conf.h"

extern char **environ;

static const struct sg_config_key demo_keys[] = {
	{ .key = "host", .def = "unix:///default.sock", .env = "MY_SEED_VAR:MY_OTHER_SEED",
	  .help = "where the demo backend listens" },
	{ .key = "mode", .def = "fast", .accepts = "fast|slow", .help = "speed" },
	{ .key = "count", .def = "3", .accepts = "uint", .help = "how many" },
	{ .key = "debug", .accepts = "bool", .help = "chatty" },
	{ .key = "token", .secret = true, .help = "API token" },
	{ .key = "pin", .accepts = "uint", .secret = true, .help = "a secret number" },
	{ .key = "template.*", .help = "template.NAME = image" },
	{ .key = NULL },
};

static const struct sg_config_key target_keys[] = {
	{ .key = "host", .help = "address" },
	{ .key = "port", .def = "22", .accepts = "uint", .help = "port" },
	{ .key = NULL },
};

/* Files made by write_ini(), removed after each test. */
static char files[8][512];
static int n_files;

/* Writes text[0..len) to a new file in $TMPDIR with the given mode;
 * returns its path. */
static const char *write_ini_n(const char *text, size_t len, mode_t mode)
{
	const char *tmp = getenv("TMPDIR");
	char *path;
	int fd;

	assert_true(n_files < 8);
	path = files[n_files];
	assert_true((size_t)snprintf(path, sizeof(files[0]), "%s/sg-test-config.XXXXXX",
				     tmp && *tmp ? tmp : "/tmp") < sizeof(files[0]));
	fd = mkstemp(path);
	assert_true(fd >= 0);
	n_files++;
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	assert_int_equal(close(fd), 0);
	return path;
}

static const char *write_ini(const char *text, mode_t mode)
{
	return write_ini_n(text, strlen(text), mode);
}

/* Removes every variable this file sets, whatever the caller's shell had. */
static void clean_env(void)
{
	static const char *const prefixes[] = { "SANDGATE_DEMO", "SANDGATE_SSH__TARGET__",
						"SANDGATE_OTHER_", "SANDGATE_CONFIG=" };
	char name[256];
	bool again = true;

	unsetenv("MY_SEED_VAR");
	unsetenv("MY_OTHER_SEED");
	while (again) {
		again = false;
		for (char **ep = environ; ep && *ep; ep++) {
			const char *eq = strchr(*ep, '=');

			for (size_t i = 0; eq && i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
				if (strncmp(*ep, prefixes[i], strlen(prefixes[i])) != 0 ||
				    (size_t)(eq - *ep) >= sizeof(name))
					continue;
				memcpy(name, *ep, (size_t)(eq - *ep));
				name[eq - *ep] = '\0';
				unsetenv(name); /* environ changed: start over */
				again = true;
				break;
			}
			if (again)
				break;
		}
	}
}

static int setup(void **state)
{
	(void)state;
	sg_config_reset();
	clean_env();
	sg_config_register("demo", demo_keys);
	sg_config_register("ssh.target.*", target_keys);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	sg_config_reset();
	clean_env();
	while (n_files > 0)
		unlink(files[--n_files]);
	return 0;
}

static void load_ok(const char *path)
{
	struct sg_err err = { 0 };

	assert_int_equal(sg_config_load(path, &err), 0);
	assert_string_equal(sg_config_file(), path);
}

/* sg_config_validate() with stderr (the log) captured into *log. */
static int validate_logged(struct sg_err *err, char *log, size_t logsz)
{
	char path[512];
	const char *tmp = getenv("TMPDIR");
	int fd, saved, r;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/sg-test-log.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	fflush(stderr);
	saved = dup(2);
	assert_true(saved >= 0);
	assert_int_equal(dup2(fd, 2), 2);
	r = sg_config_validate(err);
	fflush(stderr);
	assert_int_equal(dup2(saved, 2), 2);
	close(saved);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	n = read(fd, log, logsz - 1);
	close(fd);
	log[n > 0 ? n : 0] = '\0';
	return r;
}

/* ---- environment names ----------------------------------------------------- */

static void test_env_name(void **state)
{
	char out[256];
	static const struct {
		const char *section, *key, *want;
	} cases[] = {
		{ "ssh.target.lab", "host", "SANDGATE_SSH__TARGET__LAB_HOST" },
		{ "docker", "host", "SANDGATE_DOCKER_HOST" },
		{ "server", "max_calls", "SANDGATE_SERVER_MAX_CALLS" },
		{ "docker", "template.py-3", "SANDGATE_DOCKER_TEMPLATE__PY__3" },
		{ "my-sec", "Key", "SANDGATE_MY__SEC_KEY" },
		{ "fc", "api_key", "SANDGATE_FC_API_KEY" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		sg_config_env_name(cases[i].section, cases[i].key, out, sizeof(out));
		assert_string_equal(out, cases[i].want);
	}
	/* A short buffer is never overrun and always terminated. */
	memset(out, 'x', sizeof(out));
	sg_config_env_name("ssh.target.lab", "host", out, 16);
	assert_true(strlen(out) < 16);
	assert_memory_equal(out, "SANDGATE_", 9);
	assert_int_equal(out[16], 'x');
	memset(out, 'x', sizeof(out));
	sg_config_env_name("docker", "host", out, 4);
	assert_string_equal(out, "SAN");
	assert_int_equal(out[4], 'x');
}

/* ---- precedence ---------------------------------------------------------- */

static void test_precedence(void **state)
{
	const char *path = write_ini("; demo\n[demo]\nhost = unix:///from-file.sock\n", 0600);
	struct sg_err err = { 0 };
	char where[600];

	(void)state;
	/* 5. built-in default */
	assert_string_equal(sg_config_get("demo", "host"), "unix:///default.sock");
	assert_string_equal(sg_config_source("demo", "host"), "default");
	/* 4. the file */
	load_ok(path);
	assert_string_equal(sg_config_get("demo", "host"), "unix:///from-file.sock");
	snprintf(where, sizeof(where), "%s:3", path);
	assert_string_equal(sg_config_source("demo", "host"), where);
	/* 3. the key's seed variable */
	setenv("MY_SEED_VAR", "tcp://seed:2375", 1);
	assert_string_equal(sg_config_get("demo", "host"), "tcp://seed:2375");
	assert_string_equal(sg_config_source("demo", "host"), "environment MY_SEED_VAR");
	/* 2. SANDGATE_<SECTION>_<KEY> */
	setenv("SANDGATE_DEMO_HOST", "tcp://sandgate-env:2375", 1);
	assert_string_equal(sg_config_get("demo", "host"), "tcp://sandgate-env:2375");
	assert_string_equal(sg_config_source("demo", "host"), "environment SANDGATE_DEMO_HOST");
	/* 1. --set */
	assert_int_equal(sg_config_set_override("demo.host=tcp://cli:2375", &err), 0);
	assert_string_equal(sg_config_get("demo", "host"), "tcp://cli:2375");
	assert_string_equal(sg_config_source("demo", "host"), "--set");
	/* The last --set wins. */
	assert_int_equal(sg_config_set_override("demo.host=tcp://cli2:2375", &err), 0);
	assert_string_equal(sg_config_get("demo", "host"), "tcp://cli2:2375");

	/* Peeling the layers off again: without the SANDGATE_ variable the
	 * seed wins over the file, and without the seed the file does. */
	sg_config_reset();
	sg_config_register("demo", demo_keys);
	load_ok(path);
	assert_string_equal(sg_config_get("demo", "host"), "tcp://sandgate-env:2375");
	unsetenv("SANDGATE_DEMO_HOST");
	assert_string_equal(sg_config_get("demo", "host"), "tcp://seed:2375");
	unsetenv("MY_SEED_VAR");
	assert_string_equal(sg_config_get("demo", "host"), "unix:///from-file.sock");
	assert_string_equal(sg_config_source("demo", "host"), where);
}

static void test_seed_variables(void **state)
{
	(void)state;
	/* The second seed alone. */
	setenv("MY_OTHER_SEED", "tcp://other:1", 1);
	assert_string_equal(sg_config_get("demo", "host"), "tcp://other:1");
	assert_string_equal(sg_config_source("demo", "host"), "environment MY_OTHER_SEED");
	/* The first listed seed wins over the second. */
	setenv("MY_SEED_VAR", "tcp://first:1", 1);
	assert_string_equal(sg_config_get("demo", "host"), "tcp://first:1");
	assert_string_equal(sg_config_source("demo", "host"), "environment MY_SEED_VAR");
	/* An empty seed variable counts as unset. */
	setenv("MY_SEED_VAR", "", 1);
	assert_string_equal(sg_config_get("demo", "host"), "tcp://other:1");
	assert_string_equal(sg_config_source("demo", "host"), "environment MY_OTHER_SEED");
	/* Seeds belong to their key only. */
	assert_string_equal(sg_config_get("demo", "mode"), "fast");
	/* Without a registered key there is no default and no seed. */
	assert_null(sg_config_get("demo", "nosuchkey"));
	assert_string_equal(sg_config_source("demo", "nosuchkey"), "default");
	assert_null(sg_config_get("nosection", "host"));
}

static void test_set_override_parsing(void **state)
{
	struct sg_err err = { 0 };

	(void)state;
	/* A section with dots: the last part is the key. */
	assert_int_equal(sg_config_set_override("ssh.target.lab.host=10.0.0.5", &err), 0);
	assert_string_equal(sg_config_get("ssh.target.lab", "host"), "10.0.0.5");
	assert_string_equal(sg_config_source("ssh.target.lab", "host"), "--set");
	assert_null(sg_config_get("ssh.target", "lab.host"));
	/* A key with dots: the first part is the section. */
	assert_int_equal(sg_config_set_override("demo.template.py=python:3.12", &err), 0);
	assert_string_equal(sg_config_get("demo", "template.py"), "python:3.12");
	/* The value is everything after the first '='. */
	assert_int_equal(sg_config_set_override("demo.token=a=b=c", &err), 0);
	assert_string_equal(sg_config_get("demo", "token"), "a=b=c");
	assert_int_equal(sg_config_set_override("demo.mode=", &err), 0);
	assert_string_equal(sg_config_get("demo", "mode"), "");

	assert_int_equal(sg_config_set_override("demo.host", &err), -1);
	assert_int_equal(err.code, SG_E_INVAL);
	assert_string_equal(err.msg,
			    "--set 'demo.host': expected SECTION.KEY=VALUE, e.g. --set log.level=debug");
	assert_int_equal(sg_config_set_override("nodot=1", &err), -1);
	assert_int_equal(err.code, SG_E_INVAL);
	assert_string_equal(err.msg,
			    "--set 'nodot=1': expected SECTION.KEY=VALUE, e.g. --set log.level=debug");
	assert_int_equal(sg_config_set_override(".key=1", &err), -1);
	assert_string_equal(err.msg,
			    "--set '.key=1': expected SECTION.KEY=VALUE, e.g. --set log.level=debug");
	assert_int_equal(sg_config_set_override("demo.=1", &err), -1);
	assert_string_equal(err.msg,
			    "--set 'demo.=1': expected SECTION.KEY=VALUE, e.g. --set log.level=debug");
}

static void test_ssh_target_sections(void **state)
{
	const char *path = write_ini("[ssh.target.lab]\nhost = 10.0.0.1\nport = 2222\n", 0600);
	struct sg_err err = { 0 };
	char where[600], log[4096];

	(void)state;
	load_ok(path);
	assert_string_equal(sg_config_get("ssh.target.lab", "host"), "10.0.0.1");
	/* Defaults come from the "ssh.target.*" table. */
	assert_string_equal(sg_config_get("ssh.target.other", "port"), "22");
	/* SANDGATE_SSH__TARGET__LAB_HOST beats the file. */
	setenv("SANDGATE_SSH__TARGET__LAB_HOST", "10.9.9.9", 1);
	assert_string_equal(sg_config_get("ssh.target.lab", "host"), "10.9.9.9");
	assert_string_equal(sg_config_source("ssh.target.lab", "host"),
			    "environment SANDGATE_SSH__TARGET__LAB_HOST");
	snprintf(where, sizeof(where), "%s:3", path);
	assert_string_equal(sg_config_source("ssh.target.lab", "port"), where);
	assert_int_equal(validate_logged(&err, log, sizeof(log)), 0);
	assert_string_equal(log, "");
	/* A bad value in a named target's variable is refused like any other. */
	setenv("SANDGATE_SSH__TARGET__LAB_PORT", "abc", 1);
	assert_int_equal(validate_logged(&err, log, sizeof(log)), -1);
	assert_int_equal(err.code, SG_E_INVAL);
	assert_string_equal(err.msg, "environment SANDGATE_SSH__TARGET__LAB_PORT: port = 'abc' is not valid: expected a whole number (0 or more)");
	unsetenv("SANDGATE_SSH__TARGET__LAB_PORT");
	/* And a target without a key is a usage error, not a warning. */
	assert_int_equal(sg_config_set_override("ssh.target.=x", &err), -1);
	assert_string_equal(err.msg, "--set 'ssh.target.=x': expected SECTION.KEY=VALUE, e.g. --set log.level=debug");
}

static void test_file_lines(void **state)
{
	const char *path = write_ini("# sandgate test\n"
				     "\n"
				     "[demo]\n"
				     "; a comment\n"
				     "mode = slow\n"
				     "count = 5\n"
				     "\n"
				     "[demo]\n"
				     "count = 9\n",
				     0600);
	char where[600];

	(void)state;
	load_ok(path);
	assert_string_equal(sg_config_get("demo", "mode"), "slow");
	snprintf(where, sizeof(where), "%s:5", path);
	assert_string_equal(sg_config_source("demo", "mode"), where);
	/* A repeated key: the last one wins and is the one reported. */
	assert_string_equal(sg_config_get("demo", "count"), "9");
	snprintf(where, sizeof(where), "%s:9", path);
	assert_string_equal(sg_config_source("demo", "count"), where);
	/* Unset in the file: the default. */
	assert_string_equal(sg_config_get("demo", "host"), "unix:///default.sock");
	assert_string_equal(sg_config_source("demo", "host"), "default");
}

/* Values in double quotes (a TOML habit) are read without them. */
static void test_quoted_values(void **state)
{
	const char *path = write_ini("[demo]\n"
				     "host = \"unix:///q.sock\"\n"
				     "mode = \"\"\n"
				     "template.a = \"say \\\"hi\\\" \\\\ there\"\n"
				     "template.b = \"open\n"
				     "template.c = \"x\" \"y\"\n"
				     "template.d = plain \"inner\" text\n"
				     /* runs of escapes, as the fuzzer wrote them */
				     "template.e = \"\\\\\\\\\\\"\\\\\\\"q\"\n",
				     0600);

	(void)state;
	load_ok(path);
	assert_string_equal(sg_config_get("demo", "host"), "unix:///q.sock");
	assert_string_equal(sg_config_get("demo", "mode"), "");
	assert_string_equal(sg_config_get("demo", "template.a"), "say \"hi\" \\ there");
	/* not one quoted value: kept as written */
	assert_string_equal(sg_config_get("demo", "template.b"), "\"open");
	assert_string_equal(sg_config_get("demo", "template.c"), "\"x\" \"y\"");
	assert_string_equal(sg_config_get("demo", "template.d"), "plain \"inner\" text");
	assert_string_equal(sg_config_get("demo", "template.e"), "\\\\\"\\\"q");
}

static void test_load_errors(void **state)
{
	struct sg_err err = { 0 };
	char want[1200], missing[600];
	const char *bad = write_ini("[demo]\nthis line is not ini\n", 0600);
	const char *good = write_ini("[demo]\nmode = slow\n", 0600);

	(void)state;
	snprintf(missing, sizeof(missing), "%s.does-not-exist", bad);
	assert_int_equal(sg_config_load(missing, &err), -1);
	assert_int_equal(err.code, SG_E_IO);
	snprintf(want, sizeof(want), "cannot read config file '%s': No such file or directory",
		 missing);
	assert_string_equal(err.msg, want);

	assert_int_equal(sg_config_load(bad, &err), -1);
	assert_int_equal(err.code, SG_E_INVAL);
	snprintf(want, sizeof(want),
		 "%s:2: not valid INI: expected '[section]', 'key = value' or a comment", bad);
	assert_string_equal(err.msg, want);

	/* Without --config, $SANDGATE_CONFIG names the file. */
	sg_config_reset();
	sg_config_register("demo", demo_keys);
	setenv("SANDGATE_CONFIG", good, 1);
	assert_int_equal(sg_config_load(NULL, &err), 0);
	assert_string_equal(sg_config_file(), good);
	assert_string_equal(sg_config_get("demo", "mode"), "slow");
}

/* Lines are taken whole or the file is refused: inih reads at most 199
 * bytes of a line (the rest became a line of its own, so a long comment
 * could end in a setting), drops what follows a NUL, makes an indented line
 * the continuation of the previous key's value, and cuts section names to
 * 49 bytes (the fuzzer's oracle, t/fuzz/fuzz_conf.c, found these). */
static void test_lines_whole(void **state)
{
	struct sg_err err = { 0 };
	char text[600], want[1200];
	const char *path;

	(void)state;
	/* 199 bytes: the longest line taken */
	snprintf(text, sizeof(text), "[demo]\nmode = slow ; %0*d\n", 199 - 14, 0);
	path = write_ini(text, 0600);
	load_ok(path);
	assert_string_equal(sg_config_get("demo", "mode"), "slow");

	sg_config_reset();
	sg_config_register("demo", demo_keys);
	snprintf(text, sizeof(text), "[demo]\n# %0*dmode = slow\n", 187, 0);
	assert_int_equal(strlen(strchr(text, '#')), 201);
	path = write_ini(text, 0600);
	assert_int_equal(sg_config_load(path, &err), -1);
	assert_int_equal(err.code, SG_E_INVAL);
	snprintf(want, sizeof(want),
		 "%s:2: line longer than 199 bytes, the most the INI reader takes: shorten it, or give the value with --set or its SANDGATE_* variable",
		 path);
	assert_string_equal(err.msg, want);
	/* nothing of the long line was taken */
	assert_string_equal(sg_config_get("demo", "mode"), "fast");

	sg_config_reset();
	sg_config_register("demo", demo_keys);
	path = write_ini("[demo]\nmode = slow\n  count = 4\n", 0600);
	assert_int_equal(sg_config_load(path, &err), -1);
	snprintf(want, sizeof(want),
		 "%s:3: an indented line: sandgate's INI files have no continuation lines; remove the leading blanks",
		 path);
	assert_string_equal(err.msg, want);
	assert_string_equal(sg_config_get("demo", "mode"), "slow");

	sg_config_reset();
	sg_config_register("demo", demo_keys);
	path = write_ini("[demo]\nmode = slow\n\vcount = 4\n", 0600);
	assert_int_equal(sg_config_load(path, &err), -1);
	assert_non_null(strstr(err.msg, ":3: an indented line"));

	sg_config_reset();
	sg_config_register("demo", demo_keys);
	path = write_ini("[demo]\n  ; indented comment\n\t# another\n  \f \nmode = slow\r\n \t\r\n", 0600);
	load_ok(path);
	assert_string_equal(sg_config_get("demo", "mode"), "slow");

	sg_config_reset();
	sg_config_register("demo", demo_keys);
	path = write_ini_n("[demo]\nmode = slow\0count = 4\n", 27, 0600);
	assert_int_equal(sg_config_load(path, &err), -1);
	snprintf(want, sizeof(want), "%s:2: the line holds a NUL byte: the file must be text", path);
	assert_string_equal(err.msg, want);

	sg_config_reset();
	sg_config_register("demo", demo_keys);
	snprintf(text, sizeof(text), "[ssh.target.%0*d]\nhost = x\n", 50 - 11, 0);
	path = write_ini(text, 0600);
	assert_int_equal(sg_config_load(path, &err), -1);
	snprintf(want, sizeof(want), "%s:1: section name longer than 49 bytes", path);
	assert_string_equal(err.msg, want);
	snprintf(text, sizeof(text), "[ssh.target.%0*d]\nhost = x\n", 49 - 11, 0);
	sg_config_reset();
	path = write_ini(text, 0600);
	load_ok(path);
}

/* ---- validation ---------------------------------------------------------- */

static void test_validate_unknown_warns(void **state)
{
	const char *path = write_ini("[demo]\n"
				     "bogus = 1\n"
				     "mode = slow\n"
				     "[nosuch]\n"
				     "x = 1\n"
				     "[ssh.target.lab]\n"
				     "hots = 10.0.0.1\n",
				     0600);
	struct sg_err err = { 0 };
	char want[700], log[4096];

	(void)state;
	load_ok(path);
	assert_int_equal(validate_logged(&err, log, sizeof(log)), 0);
	snprintf(want, sizeof(want), " warning: %s:2: unknown key 'bogus' in [demo] ignored\n", path);
	assert_non_null(strstr(log, want));
	snprintf(want, sizeof(want), " warning: %s:5: unknown section [nosuch] ignored\n", path);
	assert_non_null(strstr(log, want));
	snprintf(want, sizeof(want),
		 " warning: %s:7: unknown key 'hots' in [ssh.target.lab] ignored\n", path);
	assert_non_null(strstr(log, want));
	/* Exactly three lines, nothing about the valid key. */
	assert_null(strstr(log, "mode"));
	{
		int lines = 0;

		for (const char *c = log; *c; c++)
			lines += *c == '\n';
		assert_int_equal(lines, 3);
	}
	/* An unknown --set key warns the same way. */
	assert_int_equal(sg_config_set_override("demo.colour=red", &err), 0);
	assert_int_equal(validate_logged(&err, log, sizeof(log)), 0);
	assert_non_null(strstr(log, " warning: --set demo.colour: unknown key 'colour' in [demo] ignored\n"));
}

static void test_validate_bad_enum(void **state)
{
	const char *path = write_ini("[demo]\nhost = x\nmode = medium\n", 0600);
	struct sg_err err = { 0 };
	char want[700], log[4096];

	(void)state;
	load_ok(path);
	assert_int_equal(validate_logged(&err, log, sizeof(log)), -1);
	assert_int_equal(err.code, SG_E_INVAL);
	snprintf(want, sizeof(want),
		 "%s:3: [demo] mode = 'medium' is not valid: expected fast|slow", path);
	assert_string_equal(err.msg, want);
	/* An enum is matched whole and case-sensitively. */
	sg_config_reset();
	sg_config_register("demo", demo_keys);
	path = write_ini("[demo]\nmode = fas\n", 0600);
	load_ok(path);
	assert_int_equal(sg_config_validate(&err), -1);
	snprintf(want, sizeof(want), "%s:2: [demo] mode = 'fas' is not valid: expected fast|slow", path);
	assert_string_equal(err.msg, want);
	sg_config_reset();
	sg_config_register("demo", demo_keys);
	path = write_ini("[demo]\nmode = Slow\n", 0600);
	load_ok(path);
	assert_int_equal(sg_config_validate(&err), -1);
	snprintf(want, sizeof(want), "%s:2: [demo] mode = 'Slow' is not valid: expected fast|slow", path);
	assert_string_equal(err.msg, want);
}

static void test_validate_bad_uint(void **state)
{
	static const char *const bad[] = { "-3", "12abc", "", "99999999999999999999999",
					   "+7", "0x10", "1.5" };
	/* inih strips blanks around a value: " 7 " is "7". */
	static const char *const good[] = { "0", "7", " 7 ", "18446744073709551615" };
	struct sg_err err = { 0 };
	char text[200], want[800];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *path;

		sg_config_reset();
		sg_config_register("demo", demo_keys);
		snprintf(text, sizeof(text), "[demo]\n\ncount = %s\n", bad[i]);
		path = write_ini(text, 0600);
		load_ok(path);
		assert_int_equal(sg_config_validate(&err), -1);
		assert_int_equal(err.code, SG_E_INVAL);
		snprintf(want, sizeof(want),
			 "%s:3: [demo] count = '%s' is not valid: expected a whole number (0 or more)",
			 path, bad[i]);
		assert_string_equal(err.msg, want);
		unlink(files[--n_files]);
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		sg_config_reset();
		sg_config_register("demo", demo_keys);
		snprintf(text, sizeof(text), "[demo]\ncount = %s\n", good[i]);
		load_ok(write_ini(text, 0600));
		assert_int_equal(sg_config_validate(&err), 0);
		unlink(files[--n_files]);
	}
}

static void test_validate_bool(void **state)
{
	struct sg_err err = { 0 };
	char want[800];
	const char *path = write_ini("[demo]\ndebug = maybe\n", 0600);

	(void)state;
	load_ok(path);
	assert_int_equal(sg_config_validate(&err), -1);
	snprintf(want, sizeof(want), "%s:2: [demo] debug = 'maybe' is not valid: expected true or false",
		 path);
	assert_string_equal(err.msg, want);
	assert_true(sg_config_bool("demo", "debug", true));   /* malformed: def */
	assert_false(sg_config_bool("demo", "debug", false));

	assert_int_equal(sg_config_set_override("demo.debug=YES", &err), 0);
	assert_true(sg_config_bool("demo", "debug", false));
	assert_int_equal(sg_config_set_override("demo.debug=off", &err), 0);
	assert_false(sg_config_bool("demo", "debug", true));
}

static void test_validate_env_and_set(void **state)
{
	struct sg_err err = { 0 };

	(void)state;
	setenv("SANDGATE_DEMO_MODE", "medium", 1);
	assert_int_equal(sg_config_validate(&err), -1);
	assert_int_equal(err.code, SG_E_INVAL);
	assert_string_equal(err.msg,
			    "environment SANDGATE_DEMO_MODE: [demo] mode = 'medium' is not valid: expected fast|slow");
	unsetenv("SANDGATE_DEMO_MODE");
	assert_int_equal(sg_config_validate(&err), 0);

	assert_int_equal(sg_config_set_override("demo.count=lots", &err), 0);
	assert_int_equal(sg_config_validate(&err), -1);
	assert_string_equal(err.msg,
			    "--set demo.count: [demo] count = 'lots' is not valid: expected a whole number (0 or more)");
}

static void test_secret_file_mode(void **state)
{
	const char *path = write_ini("[demo]\nmode = slow\ntoken = s3cr3t-value\n", 0644);
	struct sg_err err = { 0 };
	char want[2000], log[4096];

	(void)state;
	load_ok(path);
	assert_int_equal(validate_logged(&err, log, sizeof(log)), -1);
	assert_int_equal(err.code, SG_E_PERM);
	snprintf(want, sizeof(want),
		 "%s:3: [demo] token is a secret but '%s' is readable by others: run chmod 600 '%s' or pass it in the environment",
		 path, path, path);
	assert_string_equal(err.msg, want);
	assert_null(strstr(err.msg, "s3cr3t"));
	assert_null(strstr(log, "s3cr3t"));

	/* Group-readable is refused too. */
	sg_config_reset();
	sg_config_register("demo", demo_keys);
	path = write_ini("[demo]\ntoken = s3cr3t-value\n", 0640);
	load_ok(path);
	assert_int_equal(sg_config_validate(&err), -1);
	assert_int_equal(err.code, SG_E_PERM);

	/* Mode 0600 is accepted. */
	sg_config_reset();
	sg_config_register("demo", demo_keys);
	path = write_ini("[demo]\ntoken = s3cr3t-value\n", 0600);
	load_ok(path);
	assert_int_equal(sg_config_validate(&err), 0);
	assert_string_equal(sg_config_get("demo", "token"), "s3cr3t-value");

	/* A 0644 file without secrets is fine, and so is the secret in the
	 * environment next to it. */
	sg_config_reset();
	sg_config_register("demo", demo_keys);
	path = write_ini("[demo]\nmode = slow\n", 0644);
	load_ok(path);
	setenv("SANDGATE_DEMO_TOKEN", "s3cr3t-value", 1);
	assert_int_equal(sg_config_validate(&err), 0);
}

static void test_secret_value_hidden(void **state)
{
	const char *path = write_ini("[demo]\npin = hunter2\n", 0600);
	struct sg_err err = { 0 };
	char want[800];

	(void)state;
	load_ok(path);
	assert_int_equal(sg_config_validate(&err), -1);
	snprintf(want, sizeof(want),
		 "%s:2: [demo] pin = '(hidden)' is not valid: expected a whole number (0 or more)", path);
	assert_string_equal(err.msg, want);
	assert_null(strstr(err.msg, "hunter2"));
}

/* ---- typed getters --------------------------------------------------------- */

static void test_typed_getters(void **state)
{
	struct sg_err err = { 0 };

	(void)state;
	assert_int_equal(sg_config_int("demo", "count", 99), 3);      /* the default */
	assert_int_equal(sg_config_int("demo", "nosuch", 99), 99);    /* unset */
	assert_int_equal(sg_config_set_override("demo.count=12", &err), 0);
	assert_int_equal(sg_config_int("demo", "count", 99), 12);
	assert_int_equal(sg_config_set_override("demo.count=12x", &err), 0);
	assert_int_equal(sg_config_int("demo", "count", 99), 99);     /* malformed */
	assert_int_equal(sg_config_set_override("demo.count=", &err), 0);
	assert_int_equal(sg_config_int("demo", "count", 99), 99);     /* empty */
	assert_false(sg_config_bool("demo", "debug", false));         /* no default */
}

/* ---- prefix iteration -------------------------------------------------------- */

struct seen {
	char text[1024];
	int n;
};

static void collect(const char *key, const char *value, void *ud)
{
	struct seen *s = ud;
	size_t o = strlen(s->text);

	snprintf(s->text + o, sizeof(s->text) - o, "%s=%s;", key, value);
	s->n++;
}

static void test_each_template(void **state)
{
	const char *path = write_ini("[demo]\n"
				     "template.py = python:3\n"
				     "template.node = node:20\n"
				     "other = x\n"
				     "templates = no\n"
				     "template = no\n"
				     "template.py = python:3.12\n"
				     "[otherdemo]\n"
				     "template.go = golang:1\n",
				     0600);
	struct seen s = { "", 0 };
	struct sg_err err = { 0 };

	(void)state;
	load_ok(path);
	sg_config_each("demo", "template.", collect, &s);
	assert_string_equal(s.text, "template.py=python:3.12;template.node=node:20;");
	assert_int_equal(s.n, 2);

	/* From the environment: new keys are added (lower-cased), and a
	 * variable for a key of the file changes its value, still once. */
	setenv("SANDGATE_DEMO_TEMPLATE__RS", "rust:1", 1);
	setenv("SANDGATE_DEMO_TEMPLATE__PY", "python:3.13", 1);
	setenv("SANDGATE_OTHERDEMO_TEMPLATE__JS", "node:22", 1);
	memset(&s, 0, sizeof(s));
	sg_config_each("demo", "template.", collect, &s);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.text, "template.py=python:3.13;template.node=node:20;template.rs=rust:1;");

	/* And from --set, with its precedence. */
	assert_int_equal(sg_config_set_override("demo.template.node=node:24", &err), 0);
	assert_int_equal(sg_config_set_override("demo.template.c=gcc:14", &err), 0);
	memset(&s, 0, sizeof(s));
	sg_config_each("demo", "template.", collect, &s);
	assert_int_equal(s.n, 4);
	assert_string_equal(s.text,
			    "template.py=python:3.13;template.node=node:24;template.c=gcc:14;"
			    "template.rs=rust:1;");

	/* Nothing for a prefix nobody uses. */
	memset(&s, 0, sizeof(s));
	sg_config_each("demo", "image.", collect, &s);
	assert_int_equal(s.n, 0);
	unsetenv("SANDGATE_OTHERDEMO_TEMPLATE__JS");
}

/* A file key whose name does not survive the env-name mapping ("-" and "."
 * both become "__") is still reported once, with the variable's value. */
static void test_each_no_duplicate(void **state)
{
	const char *path = write_ini("[demo]\ntemplate.py-3 = from-file\n", 0600);
	struct seen s = { "", 0 };

	(void)state;
	load_ok(path);
	setenv("SANDGATE_DEMO_TEMPLATE__PY__3", "from-env", 1);
	sg_config_each("demo", "template.", collect, &s);
	assert_string_equal(s.text, "template.py-3=from-env;");
	assert_int_equal(s.n, 1);
	unsetenv("SANDGATE_DEMO_TEMPLATE__PY__3");
}

static void test_each_env_only(void **state)
{
	struct seen s = { "", 0 };

	(void)state;
	setenv("SANDGATE_DEMO_TEMPLATE__BASE", "debian:12", 1);
	setenv("SANDGATE_DEMO_TEMPLATE__", "empty-name-ignored", 1);
	sg_config_each("demo", "template.", collect, &s);
	assert_string_equal(s.text, "template.base=debian:12;");
	assert_int_equal(s.n, 1);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_env_name),
		T(test_precedence),
		T(test_seed_variables),
		T(test_set_override_parsing),
		T(test_ssh_target_sections),
		T(test_file_lines),
		T(test_quoted_values),
		T(test_load_errors),
		T(test_lines_whole),
		T(test_validate_unknown_warns),
		T(test_validate_bad_enum),
		T(test_validate_bad_uint),
		T(test_validate_bool),
		T(test_validate_env_and_set),
		T(test_secret_file_mode),
		T(test_secret_value_hidden),
		T(test_typed_getters),
		T(test_each_template),
		T(test_each_no_duplicate),
		T(test_each_env_only),
	};
#undef T

	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
