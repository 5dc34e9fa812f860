/*
 * Unit tests for the plugin loader (core/plugin.c): every flaw in a backend
 * descriptor is refused before any plugin code runs, each with its own
 * message, and a good plugin is initialised once and can be found by name.
 *
 * The fake backends are built from t/plugins/fake.c (t/Makefile.inc) into
 * $SG_TEST_BUILDDIR/t/plugins/.libs/NAME.so.  They are copied into a private
 * temporary directory with mode 0755 first, so the results do not depend on
 * the umask the build ran with, and so the file-mode cases can be staged.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

#include "core/conf.h"
#include "core/plugin.h"

static const char *const fakes[] = {
	"good", "badmagic", "abimajor", "abinewer", "small", "wrongname",
	"missingslot", "initfails", "nosymbol",
};

static char libs[PATH_MAX];   /* where libtool put the .so files */
static char dir[PATH_MAX];    /* private copies, mode 0755 */
static char wdir[PATH_MAX];   /* good.so with mode 0666 */
static char gdir[PATH_MAX];   /* good.so with mode 0664 */
static char path_buf[PATH_MAX];

/* snprintf that fails the test instead of truncating. */
static void fmt(char *buf, size_t n, const char *f, ...) SG_PRINTF(3, 4);
static void fmt(char *buf, size_t n, const char *f, ...)
{
	va_list ap;
	int w;

	va_start(ap, f);
	w = vsnprintf(buf, n, f, ap);
	va_end(ap);
	if (w < 0 || (size_t)w >= n) {
		fprintf(stderr, "# path too long: %s\n", buf);
		abort();
	}
}

static const char *path_of(const char *d, const char *name)
{
	fmt(path_buf, sizeof(path_buf), "%s/%s.so", d, name);
	return path_buf;
}

static int copy_file(const char *from, const char *to, mode_t mode)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;

	if (in < 0) {
		fprintf(stderr, "# cannot open %s: %s (run `make check`, which builds the test plugins)\n",
			from, strerror(errno));
		return -1;
	}
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0) {
		close(in);
		return -1;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			n = -1;
			break;
		}
	close(in);
	if (close(out) < 0 || n < 0)
		return -1;
	return chmod(to, mode); /* explicit: the umask does not apply */
}

static int write_text(const char *to, const char *text, mode_t mode)
{
	FILE *fp = fopen(to, "w");

	if (!fp)
		return -1;
	fputs(text, fp);
	if (fclose(fp) != 0)
		return -1;
	return chmod(to, mode);
}

static int group_setup(void **state)
{
	const char *b = getenv("SG_TEST_BUILDDIR");
	const char *tmp = getenv("TMPDIR");
	char to[PATH_MAX];

	(void)state;
	fmt(libs, sizeof(libs), "%s/t/plugins/.libs", b && *b ? b : ".");
	fmt(dir, sizeof(dir), "%s/sg-test-plugin.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		return -1;
	fmt(wdir, sizeof(wdir), "%s/writable", dir);
	fmt(gdir, sizeof(gdir), "%s/groupwritable", dir);
	if (mkdir(wdir, 0700) < 0 || mkdir(gdir, 0700) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(fakes) / sizeof(fakes[0]); i++) {
		fmt(to, sizeof(to), "%s", path_of(dir, fakes[i]));
		if (copy_file(path_of(libs, fakes[i]), to, 0755) < 0)
			return -1;
	}
	fmt(to, sizeof(to), "%s", path_of(wdir, "good"));
	if (copy_file(path_of(libs, "good"), to, 0666) < 0)
		return -1;
	fmt(to, sizeof(to), "%s", path_of(gdir, "good"));
	if (copy_file(path_of(libs, "good"), to, 0664) < 0)
		return -1;
	/* Not an ELF object at all, mode 0644. */
	fmt(to, sizeof(to), "%s", path_of(dir, "garbage"));
	if (write_text(to, "this is a text file, not a shared object\n", 0644) < 0)
		return -1;
	/* A directory named like a plugin. */
	fmt(to, sizeof(to), "%s", path_of(dir, "adir"));
	if (mkdir(to, 0755) < 0)
		return -1;
	/* A symlink to a good plugin: lstat() refuses it as not regular. */
	fmt(to, sizeof(to), "%s", path_of(dir, "link"));
	if (symlink(path_of(libs, "good"), to) < 0)
		return -1;
	return 0;
}

static int group_teardown(void **state)
{
	char cmd[PATH_MAX + 32];

	(void)state;
	if (dir[0] && strstr(dir, "/sg-test-plugin.")) {
		fmt(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "# could not remove %s\n", dir);
	}
	return 0;
}

static int reset(void **state)
{
	(void)state;
	sg_plugin_unload_all();
	sg_config_reset();
	unsetenv("SG_FAKE_FINI");
	return 0;
}

/* Loads `name` from d and asserts the exact refusal; nothing new is in the
 * loader's list after it. */
static void expect_refusal(const char *d, const char *name, int code, const char *msg)
{
	struct sg_err err = { 0 };
	struct sg_plugin *before = sg_plugin_first();

	assert_null(sg_plugin_load(d, name, &err));
	assert_string_equal(err.msg, msg);
	assert_int_equal(err.code, code);
	assert_ptr_equal(sg_plugin_first(), before);
}

/* ---- the descriptor header in plugin.h --------------------------------- */

static int stub_init(const struct sg_host_api *h, void **priv, struct sg_err *err)
{
	(void)h, (void)priv, (void)err;
	return 0;
}

static void test_header_macros(void **state)
{
	struct sg_backend b = { SG_BACKEND_HEADER, .name = "x", .init = stub_init };
	static const struct sg_config_key none[] = { { .key = NULL } };

	(void)state;
	assert_int_equal(SG_PLUGIN_MAGIC, 0x53475042u);
	assert_int_equal(b.magic, SG_PLUGIN_MAGIC);
	assert_int_equal(b.abi_major, SG_PLUGIN_ABI_MAJOR);
	assert_int_equal(b.abi_minor, SG_PLUGIN_ABI_MINOR);
	assert_int_equal(b.size, sizeof(struct sg_backend));
	assert_true(SG_BACKEND_SIZE_1_0 <= sizeof(struct sg_backend));
	assert_int_equal(SG_BACKEND_SIZE_1_0,
			 offsetof(struct sg_backend, config_keys) + sizeof(void *));
	/* The header never moves. */
	assert_int_equal(offsetof(struct sg_backend, magic), 0);
	assert_int_equal(offsetof(struct sg_backend, abi_major), 4);
	assert_int_equal(offsetof(struct sg_backend, abi_minor), 8);
	assert_int_equal(offsetof(struct sg_backend, size), 12);
	assert_int_equal(offsetof(struct sg_backend, name), 16);

	/* SG_HAS: set and inside the size. */
	assert_true(SG_HAS(&b, init));
	assert_false(SG_HAS(&b, exec));         /* inside, but NULL */
	assert_false(SG_HAS(&b, config_keys));  /* inside, but NULL */
	b.config_keys = none;
	assert_true(SG_HAS(&b, config_keys));
	/* A descriptor whose size stops before a slot does not have it, even
	 * when the bytes there happen to be non-NULL. */
	b.size = (uint32_t)offsetof(struct sg_backend, config_keys);
	assert_false(SG_HAS(&b, config_keys));
	assert_true(SG_HAS(&b, init));
	b.size = (uint32_t)SG_BACKEND_SIZE_1_0;
	assert_true(SG_HAS(&b, config_keys));
	b.size = (uint32_t)SG_BACKEND_SIZE_1_0 - 1;
	assert_false(SG_HAS(&b, config_keys));
	b.size = 0;
	assert_false(SG_HAS(&b, init));
}

/* ---- a good plugin ------------------------------------------------------- */

static void test_good_loads(void **state)
{
	struct sg_err err = { 0 };
	struct sg_plugin *p;
	char want[PATH_MAX];

	(void)state;
	p = sg_plugin_load(dir, "good", &err);
	assert_non_null(p);
	assert_ptr_equal(sg_plugin_find("good"), p);
	assert_ptr_equal(sg_plugin_first(), p);
	assert_null(p->next);
	assert_string_equal(p->b->name, "good");
	assert_string_equal(p->b->version, "0.0-test");
	fmt(want, sizeof(want), "%s/good.so", dir);
	assert_string_equal(p->path, want);
	assert_non_null(p->dl);
	/* init ran once, got the host API and could read its registered
	 * config default through it. */
	assert_non_null(p->priv);
	fmt(want, sizeof(want), "good: init #1, greeting=hello, host minor %u", SG_PLUGIN_ABI_MINOR);
	assert_string_equal((const char *)p->priv, want);
	assert_string_equal(sg_config_get("good", "greeting"), "hello");
	assert_string_equal(sg_config_source("good", "greeting"), "default");
	/* The descriptor is the one the .so exports. */
	assert_ptr_equal(p->b, dlsym(p->dl, "sg_backend"));

	/* fini is called by unload_all, and the list is empty after. */
	assert_null(getenv("SG_FAKE_FINI"));
	sg_plugin_unload_all();
	assert_string_equal(getenv("SG_FAKE_FINI"), "good");
	assert_null(sg_plugin_find("good"));
	assert_null(sg_plugin_first());
}

static void test_good_sees_set_override(void **state)
{
	struct sg_err err = { 0 };
	struct sg_plugin *p;
	char want[256];

	(void)state;
	assert_int_equal(sg_config_set_override("good.greeting=bonjour", &err), 0);
	p = sg_plugin_load(dir, "good", &err);
	assert_non_null(p);
	fmt(want, sizeof(want), "good: init #1, greeting=bonjour, host minor %u", SG_PLUGIN_ABI_MINOR);
	assert_string_equal((const char *)p->priv, want);
}

static void test_duplicate(void **state)
{
	struct sg_err err = { 0 };
	struct sg_plugin *p;
	char want[256];

	(void)state;
	p = sg_plugin_load(dir, "good", &err);
	assert_non_null(p);
	expect_refusal(dir, "good", SG_E_EXISTS,
		       "plugin 'good': a plugin of that name is already loaded");
	/* The first one is untouched and init did not run again. */
	assert_ptr_equal(sg_plugin_find("good"), p);
	assert_null(p->next);
	fmt(want, sizeof(want), "good: init #1, greeting=hello, host minor %u", SG_PLUGIN_ABI_MINOR);
	assert_string_equal((const char *)p->priv, want);
}

static void test_load_list(void **state)
{
	struct sg_err err = { 0 };

	(void)state;
	assert_int_equal(sg_plugin_load_list(dir, "good", &err), 0);
	assert_non_null(sg_plugin_find("good"));
	sg_plugin_unload_all();
	/* Stops at the first failure, with that failure's message. */
	assert_int_equal(sg_plugin_load_list(dir, "good, badmagic", &err), -1);
	assert_string_equal(err.msg,
			    "plugin 'badmagic': bad magic 0xdeadbeef (expected 0x53475042): not a sandgate plugin");
	assert_non_null(sg_plugin_find("good"));
}

/* ---- descriptor flaws ------------------------------------------------------ */

static void test_badmagic(void **state)
{
	(void)state;
	expect_refusal(dir, "badmagic", SG_E_PROTO,
		       "plugin 'badmagic': bad magic 0xdeadbeef (expected 0x53475042): not a sandgate plugin");
}

static void test_abimajor(void **state)
{
	char want[256];

	(void)state;
	fmt(want, sizeof(want), "plugin 'abimajor': ABI 2.%u, sandgate supports 1.x: rebuild "
	    "the plugin against this sandgate", SG_PLUGIN_ABI_MINOR);
	expect_refusal(dir, "abimajor", SG_E_PROTO, want);
}

static void test_abinewer(void **state)
{
	char want[256];

	(void)state;
	/* Built from the macros: the minor grows with every appended slot. */
	fmt(want, sizeof(want), "plugin 'abinewer': ABI 1.%u is newer than sandgate's "
	    "1.%u: upgrade sandgate", SG_PLUGIN_ABI_MINOR + 1u, SG_PLUGIN_ABI_MINOR);
	expect_refusal(dir, "abinewer", SG_E_PROTO, want);
}

static void test_small(void **state)
{
	char want[256];

	(void)state;
	fmt(want, sizeof(want),
		 "plugin 'small': descriptor is %zu bytes, smaller than the ABI 1.0 layout (%zu)",
		 offsetof(struct sg_backend, config_keys), (size_t)SG_BACKEND_SIZE_1_0);
#if defined(__x86_64__) || defined(__aarch64__)
	assert_string_equal(want,
			    "plugin 'small': descriptor is 224 bytes, smaller than the ABI 1.0 layout (232)");
#endif
	expect_refusal(dir, "small", SG_E_PROTO, want);
}

static void test_wrongname(void **state)
{
	(void)state;
	expect_refusal(dir, "wrongname", SG_E_PROTO,
		       "plugin 'wrongname': descriptor names itself 'other': the name must equal the file stem");
	assert_null(sg_plugin_find("other"));
}

static void test_missingslot(void **state)
{
	(void)state;
	expect_refusal(dir, "missingslot", SG_E_PROTO,
		       "plugin 'missingslot': required slot 'exec' is missing");
}

static void test_initfails(void **state)
{
	(void)state;
	expect_refusal(dir, "initfails", SG_E_UNAVAILABLE,
		       "plugin 'initfails': init failed: cannot reach the fake backend at fake://nowhere: start it first");
	assert_null(sg_plugin_first());
}

static void test_nosymbol(void **state)
{
	char want[PATH_MAX + 64];

	(void)state;
	fmt(want, sizeof(want), "plugin 'nosymbol': no 'sg_backend' symbol in '%s/nosymbol.so'",
		 dir);
	expect_refusal(dir, "nosymbol", SG_E_PROTO, want);
}

/* ---- the file itself ------------------------------------------------------- */

static void test_not_elf(void **state)
{
	char path[PATH_MAX], want[2 * PATH_MAX + 256], dlerr[PATH_MAX + 128];
	void *h;

	(void)state;
	fmt(path, sizeof(path), "%s/garbage.so", dir);
	/* What dlopen itself says about this file, to find it in the message. */
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	assert_null(h);
	fmt(dlerr, sizeof(dlerr), "%s", dlerror());
	assert_non_null(strstr(dlerr, path));
	fmt(want, sizeof(want),
		 "plugin 'garbage': dlopen failed: %s (check its libraries with ldd '%s')", dlerr,
		 path);
	expect_refusal(dir, "garbage", SG_E_IO, want);
}

static void test_missing_file(void **state)
{
	char want[PATH_MAX + 256];

	(void)state;
	fmt(want, sizeof(want),
		 "plugin 'absent': cannot find '%s/absent.so': No such file or directory (set [plugin] dir or SANDGATE_PLUGIN_DIR)",
		 dir);
	expect_refusal(dir, "absent", SG_E_NOTFOUND, want);
}

static void test_not_regular(void **state)
{
	char want[PATH_MAX + 128];

	(void)state;
	fmt(want, sizeof(want), "plugin 'adir': '%s/adir.so' is not a regular file", dir);
	expect_refusal(dir, "adir", SG_E_PERM, want);
	fmt(want, sizeof(want), "plugin 'link': '%s/link.so' is not a regular file", dir);
	expect_refusal(dir, "link", SG_E_PERM, want);
}

static void test_writable_by_others(void **state)
{
	char want[3 * PATH_MAX];
	struct stat st;

	(void)state;
	assert_int_equal(stat(path_of(wdir, "good"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0666);
	fmt(want, sizeof(want),
		 "plugin 'good': '%s/good.so' is writable by group or others: run chmod go-w '%s/good.so'",
		 wdir, wdir);
	expect_refusal(wdir, "good", SG_E_PERM, want);
	/* Group-writable is refused the same way. */
	fmt(want, sizeof(want),
		 "plugin 'good': '%s/good.so' is writable by group or others: run chmod go-w '%s/good.so'",
		 gdir, gdir);
	expect_refusal(gdir, "good", SG_E_PERM, want);
	/* init never ran. */
	assert_null(getenv("SG_FAKE_FINI"));
}

static void test_bad_names(void **state)
{
	(void)state;
	expect_refusal(dir, "Good", SG_E_INVAL,
		       "plugin name 'Good' is not valid: use 1 to 32 lower-case letters, digits and '_'");
	expect_refusal(dir, "../good", SG_E_INVAL,
		       "plugin name '../good' is not valid: use 1 to 32 lower-case letters, digits and '_'");
	expect_refusal(dir, "", SG_E_INVAL,
		       "plugin name '' is not valid: use 1 to 32 lower-case letters, digits and '_'");
	expect_refusal(dir, "a23456789012345678901234567890123", SG_E_INVAL,
		       "plugin name 'a23456789012345678901234567890123' is not valid: use 1 to 32 lower-case letters, digits and '_'");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_header_macros),
		cmocka_unit_test_setup_teardown(test_good_loads, reset, reset),
		cmocka_unit_test_setup_teardown(test_good_sees_set_override, reset, reset),
		cmocka_unit_test_setup_teardown(test_duplicate, reset, reset),
		cmocka_unit_test_setup_teardown(test_load_list, reset, reset),
		cmocka_unit_test_setup_teardown(test_badmagic, reset, reset),
		cmocka_unit_test_setup_teardown(test_abimajor, reset, reset),
		cmocka_unit_test_setup_teardown(test_abinewer, reset, reset),
		cmocka_unit_test_setup_teardown(test_small, reset, reset),
		cmocka_unit_test_setup_teardown(test_wrongname, reset, reset),
		cmocka_unit_test_setup_teardown(test_missingslot, reset, reset),
		cmocka_unit_test_setup_teardown(test_initfails, reset, reset),
		cmocka_unit_test_setup_teardown(test_nosymbol, reset, reset),
		cmocka_unit_test_setup_teardown(test_not_elf, reset, reset),
		cmocka_unit_test_setup_teardown(test_missing_file, reset, reset),
		cmocka_unit_test_setup_teardown(test_not_regular, reset, reset),
		cmocka_unit_test_setup_teardown(test_writable_by_others, reset, reset),
		cmocka_unit_test_setup_teardown(test_bad_names, reset, reset),
	};

	return cmocka_run_group_tests_name("plugin", tests, group_setup, group_teardown);
}
