/*
 * Unit tests for the plugin loader (core/registry/plugin.c): every flaw in a backend
 * descriptor is refused before any plugin code runs, each with its own
 * message; a good plugin is initialised once and can be found by name; the
 * plugin path, discovery and [plugin] load; symlinks; the probes and the
 * choice of the default backend.
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

#include "core/base/conf.h"
#include "core/base/log.h"
#include "core/registry/plugin.h"
#include "core/base/util.h"

static const char *const fakes[] = {
	"good", "badmagic", "abimajor", "abinewer", "small", "wrongname",
	"noexec", "nofilestat", "halfstream", "statusnostream", "badaction",
	"withactions", "initfails", "nosymbol", "fakepref", "fakeoff",
};

static char libs[PATH_MAX];   /* where libtool put the .so files */
static char dir[PATH_MAX];    /* private copies, mode 0755 */
static char wdir[PATH_MAX];   /* good.so with mode 0666 */
static char gdir[PATH_MAX];   /* good.so with mode 0664 */
static char sdir[PATH_MAX];   /* symlinks: good.so -> dir's, adir.so -> a directory */
static char gsdir[PATH_MAX];  /* good.so -> gdir's group-writable good.so */
static char ddir[PATH_MAX];   /* mode 0770, holding good.so 0755 */
static char dsdir[PATH_MAX];  /* good.so -> ddir's good.so */
static char tdir[PATH_MAX];   /* mode 01777 (sticky), holding good.so 0755 */
static char p1[PATH_MAX];     /* discovery: good, badmagic, fakepref (copies) */
static char p2[PATH_MAX];     /* discovery: good (copy), fakeoff (symlink) */
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

/* Copies the built NAME.so into d with mode. */
static int stage(const char *d, const char *name, mode_t mode)
{
	char from[PATH_MAX], to[PATH_MAX];

	fmt(from, sizeof(from), "%s", path_of(libs, name));
	fmt(to, sizeof(to), "%s", path_of(d, name));
	return copy_file(from, to, mode);
}

/* Makes d/NAME.so a symlink to target/NAME.so. */
static int link_to(const char *d, const char *name, const char *target)
{
	char from[PATH_MAX];

	fmt(from, sizeof(from), "%s", path_of(target, name));
	return symlink(from, path_of(d, name));
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

static int subdir(char *buf, const char *name)
{
	fmt(buf, PATH_MAX, "%s/%s", dir, name);
	return mkdir(buf, 0700);
}

static int group_setup(void **state)
{
	const char *b = getenv("SG_TEST_BUILDDIR");
	const char *tmp = getenv("TMPDIR");
	char to[PATH_MAX];

	(void)state;
	/* `make check` points these at the built backends; the loader must see
	 * only what each test sets. */
	unsetenv("SANDGATE_PLUGIN_DIR");
	unsetenv("SANDGATE_PLUGIN_PATH");
	unsetenv("SANDGATE_PLUGIN_LOAD");
	unsetenv("SANDGATE_SANDBOX_DEFAULT_BACKEND");
	fmt(libs, sizeof(libs), "%s/t/plugins/.libs", b && *b ? b : ".");
	fmt(dir, sizeof(dir), "%s/sg-test-plugin.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		return -1;
	/* The loader reports resolved paths: the test's are resolved too. */
	if (!realpath(dir, to))
		return -1;
	fmt(dir, sizeof(dir), "%s", to);
	if (subdir(wdir, "writable") < 0 || subdir(gdir, "groupwritable") < 0 ||
	    subdir(sdir, "symlinks") < 0 || subdir(gsdir, "gwsymlink") < 0 ||
	    subdir(ddir, "gwdir") < 0 || subdir(dsdir, "gwdirlink") < 0 ||
	    subdir(tdir, "sticky") < 0 || subdir(p1, "p1") < 0 || subdir(p2, "p2") < 0)
		return -1;
	for (size_t i = 0; i < sizeof(fakes) / sizeof(fakes[0]); i++)
		if (stage(dir, fakes[i], 0755) < 0)
			return -1;
	if (stage(wdir, "good", 0666) < 0 || stage(gdir, "good", 0664) < 0 ||
	    stage(ddir, "good", 0755) < 0 || chmod(ddir, 0770) < 0 ||
	    link_to(dsdir, "good", ddir) < 0 || stage(tdir, "good", 0755) < 0 ||
	    chmod(tdir, 01777) < 0)
		return -1;
	/* Not an ELF object at all, mode 0644. */
	fmt(to, sizeof(to), "%s", path_of(dir, "garbage"));
	if (write_text(to, "this is a text file, not a shared object\n", 0644) < 0)
		return -1;
	/* A directory named like a plugin. */
	fmt(to, sizeof(to), "%s", path_of(dir, "adir"));
	if (mkdir(to, 0755) < 0)
		return -1;
	if (link_to(sdir, "good", dir) < 0 || link_to(sdir, "adir", dir) < 0 ||
	    link_to(sdir, "gone", dir) < 0 || link_to(gsdir, "good", gdir) < 0)
		return -1;
	if (stage(p1, "good", 0755) < 0 || stage(p1, "badmagic", 0755) < 0 ||
	    stage(p1, "fakepref", 0755) < 0 || stage(p2, "good", 0755) < 0 ||
	    link_to(p2, "fakeoff", dir) < 0)
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
	unsetenv("SANDGATE_PLUGIN_DIR");
	unsetenv("SANDGATE_PLUGIN_PATH");
	return 0;
}

static void set(const char *assignment)
{
	struct sg_err err = { 0 };

	assert_int_equal(sg_config_set_override(assignment, &err), 0);
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

/* The loaded names, "a b c", into buf. */
static const char *loaded(char *buf, size_t n)
{
	size_t len = 0;

	buf[0] = '\0';
	for (struct sg_plugin *p = sg_plugin_first(); p; p = p->next) {
		fmt(buf + len, n - len, "%s%s", len ? " " : "", p->b->name);
		len += strlen(buf + len);
	}
	return buf;
}

/* ---- stderr capture, for the loader's log lines ---------------------------- */

static int saved_stderr = -1;
static char capture_path[PATH_MAX];

static void capture_start(void)
{
	int fd;

	fmt(capture_path, sizeof(capture_path), "%s/stderr.txt", dir);
	fflush(stderr);
	fd = open(capture_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	saved_stderr = dup(2);
	assert_true(saved_stderr >= 0);
	assert_int_equal(dup2(fd, 2), 2);
	close(fd);
}

/* Restores stderr and returns what was written meanwhile (caller frees). */
static char *capture_end(void)
{
	char *text = calloc(1, 65536);
	FILE *fp;
	size_t n;

	fflush(stderr);
	assert_int_equal(dup2(saved_stderr, 2), 2);
	close(saved_stderr);
	saved_stderr = -1;
	assert_non_null(text);
	fp = fopen(capture_path, "r");
	assert_non_null(fp);
	n = fread(text, 1, 65535, fp);
	text[n] = '\0';
	fclose(fp);
	fputs(text, stderr); /* kept in the test's log */
	return text;
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
	static const struct sg_action none[] = { { .name = NULL } };

	(void)state;
	assert_int_equal(SG_PLUGIN_MAGIC, 0x53475042u);
	assert_int_equal(SG_PLUGIN_ABI_MAJOR, 2);
	assert_int_equal(b.magic, SG_PLUGIN_MAGIC);
	assert_int_equal(b.abi_major, SG_PLUGIN_ABI_MAJOR);
	assert_int_equal(b.abi_minor, SG_PLUGIN_ABI_MINOR);
	assert_int_equal(b.size, sizeof(struct sg_backend));
	assert_true(SG_BACKEND_SIZE_2_0 <= sizeof(struct sg_backend));
	assert_int_equal(SG_BACKEND_SIZE_2_0,
			 offsetof(struct sg_backend, n_actions) + sizeof(size_t));
#if defined(__x86_64__) || defined(__aarch64__)
	assert_int_equal(SG_BACKEND_SIZE_2_0, 256);
#endif
	/* The header never moves. */
	assert_int_equal(offsetof(struct sg_backend, magic), 0);
	assert_int_equal(offsetof(struct sg_backend, abi_major), 4);
	assert_int_equal(offsetof(struct sg_backend, abi_minor), 8);
	assert_int_equal(offsetof(struct sg_backend, size), 12);
	assert_int_equal(offsetof(struct sg_backend, name), 16);

	/* SG_HAS: set and inside the size. */
	assert_true(SG_HAS(&b, init));
	assert_false(SG_HAS(&b, exec));     /* inside, but NULL */
	assert_false(SG_HAS(&b, actions));  /* inside, but NULL */
	b.actions = none;
	assert_true(SG_HAS(&b, actions));
	/* A descriptor whose size stops before a slot does not have it, even
	 * when the bytes there happen to be non-NULL. */
	b.size = (uint32_t)offsetof(struct sg_backend, actions);
	assert_false(SG_HAS(&b, actions));
	assert_true(SG_HAS(&b, init));
	b.size = (uint32_t)(offsetof(struct sg_backend, actions) + sizeof(void *));
	assert_true(SG_HAS(&b, actions));
	b.size = (uint32_t)(offsetof(struct sg_backend, actions) + sizeof(void *) - 1);
	assert_false(SG_HAS(&b, actions));
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
	assert_string_equal(sg_config_get("good", "preference"), "5");
	assert_string_equal(sg_config_get("good", "usable"), "true");
	/* The descriptor is the one the .so exports. */
	assert_ptr_equal(p->b, dlsym(p->dl, "sg_backend"));
	assert_int_equal(p->b->n_actions, 0);
	assert_null(p->b->actions);

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
	set("good.greeting=bonjour");
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
	/* Also when the second one is another file in another directory. */
	expect_refusal(p1, "good", SG_E_EXISTS,
		       "plugin 'good': a plugin of that name is already loaded");
	/* The first one is untouched and init did not run again. */
	assert_ptr_equal(sg_plugin_find("good"), p);
	assert_null(p->next);
	fmt(want, sizeof(want), "good: init #1, greeting=hello, host minor %u", SG_PLUGIN_ABI_MINOR);
	assert_string_equal((const char *)p->priv, want);
}

static void test_actions(void **state)
{
	struct sg_err err = { 0 };
	struct sg_plugin *p;
	json_t *params, *out = NULL;
	const struct sg_action *a;

	(void)state;
	p = sg_plugin_load(dir, "withactions", &err);
	assert_non_null(p);
	assert_int_equal(p->b->n_actions, 1);
	a = &p->b->actions[0];
	assert_string_equal(a->name, "withactions_hello");
	assert_false(a->needs_machine);
	params = json_pack("{s:s}", "name", "you");
	assert_int_equal(a->handler(p->priv, NULL, params, NULL, &out, &err), 0);
	assert_string_equal(json_string_value(json_object_get(out, "hello")), "you");
	assert_int_equal(json_object_size(out), 1);
	json_decref(out);
	json_decref(params);
	params = json_object();
	assert_int_equal(a->handler(p->priv, NULL, params, NULL, &out, &err), 0);
	assert_string_equal(json_string_value(json_object_get(out, "hello")), "world");
	json_decref(out);
	json_decref(params);
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
	fmt(want, sizeof(want), "plugin 'abimajor': ABI 3.%u, sandgate supports 2.x: rebuild "
	    "the plugin against this sandgate", SG_PLUGIN_ABI_MINOR);
	expect_refusal(dir, "abimajor", SG_E_PROTO, want);
}

static void test_abinewer(void **state)
{
	char want[256];

	(void)state;
	/* Built from the macros: the minor grows with every appended slot. */
	fmt(want, sizeof(want), "plugin 'abinewer': ABI 2.%u is newer than sandgate's "
	    "2.%u: upgrade sandgate", SG_PLUGIN_ABI_MINOR + 1u, SG_PLUGIN_ABI_MINOR);
	expect_refusal(dir, "abinewer", SG_E_PROTO, want);
}

static void test_small(void **state)
{
	char want[256];

	(void)state;
	fmt(want, sizeof(want),
	    "plugin 'small': descriptor is %zu bytes, smaller than the ABI 2.0 layout (%zu)",
	    (size_t)SG_BACKEND_SIZE_2_0 - sizeof(void *), (size_t)SG_BACKEND_SIZE_2_0);
#if defined(__x86_64__) || defined(__aarch64__)
	assert_string_equal(want,
			    "plugin 'small': descriptor is 248 bytes, smaller than the ABI 2.0 layout (256)");
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

static void test_group_flaws(void **state)
{
	(void)state;
	/* A required group missing altogether. */
	expect_refusal(dir, "noexec", SG_E_PROTO,
		       "plugin 'noexec': slot 'exec' of the exec group is missing: a group is complete or absent (and this one is required)");
	/* A required group partly filled. */
	expect_refusal(dir, "nofilestat", SG_E_PROTO,
		       "plugin 'nofilestat': slot 'file_stat' of the files group is missing: a group is complete or absent (and this one is required)");
	/* An optional group partly filled: the first empty slot is named. */
	expect_refusal(dir, "halfstream", SG_E_PROTO,
		       "plugin 'halfstream': slot 'stream_write' of the stream group is missing: a group is complete or absent (see plugin.h)");
	/* A group that needs another. */
	expect_refusal(dir, "statusnostream", SG_E_PROTO,
		       "plugin 'statusnostream': the status group needs the stream group: slot 'stream_open' is missing");
	/* An action without handler. */
	expect_refusal(dir, "badaction", SG_E_PROTO,
		       "plugin 'badaction': action 0 ('badaction_hello') lacks its handler");
	/* No plugin code ran. */
	assert_null(getenv("SG_FAKE_FINI"));
	assert_null(sg_plugin_find("other"));
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
	    "plugin 'garbage': dlopen failed: %s (check its libraries with ldd '%s')", dlerr, path);
	expect_refusal(dir, "garbage", SG_E_IO, want);
}

static void test_missing_file(void **state)
{
	char want[PATH_MAX + 256];

	(void)state;
	fmt(want, sizeof(want),
	    "plugin 'absent': cannot find '%s/absent.so': No such file or directory (set [plugin] path or SANDGATE_PLUGIN_PATH)",
	    dir);
	expect_refusal(dir, "absent", SG_E_NOTFOUND, want);
	/* A symlink to nothing is missing too. */
	fmt(want, sizeof(want),
	    "plugin 'gone': cannot find '%s/gone.so': No such file or directory (set [plugin] path or SANDGATE_PLUGIN_PATH)",
	    sdir);
	expect_refusal(sdir, "gone", SG_E_NOTFOUND, want);
}

static void test_not_regular(void **state)
{
	char want[PATH_MAX + 128];

	(void)state;
	fmt(want, sizeof(want), "plugin 'adir': '%s/adir.so' is not a regular file", dir);
	expect_refusal(dir, "adir", SG_E_PERM, want);
	/* A symlink to a directory. */
	fmt(want, sizeof(want),
	    "plugin 'adir': '%s/adir.so' is not a regular file (a link to '%s/adir.so')", sdir, dir);
	expect_refusal(sdir, "adir", SG_E_PERM, want);
}

static void test_writable_by_others(void **state)
{
	char want[3 * PATH_MAX];
	struct stat st;

	(void)state;
	assert_int_equal(stat(path_of(wdir, "good"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0666);
	fmt(want, sizeof(want),
	    "plugin 'good': file '%s/good.so' is writable by group or others: run chmod go-w on it",
	    wdir);
	expect_refusal(wdir, "good", SG_E_PERM, want);
	/* Group-writable is refused the same way. */
	fmt(want, sizeof(want),
	    "plugin 'good': file '%s/good.so' is writable by group or others: run chmod go-w on it",
	    gdir);
	expect_refusal(gdir, "good", SG_E_PERM, want);
	/* init never ran. */
	assert_null(getenv("SG_FAKE_FINI"));
}

static void test_symlink_accepted(void **state)
{
	struct sg_err err = { 0 };
	struct sg_plugin *p;
	struct stat st;
	char want[PATH_MAX];

	(void)state;
	assert_int_equal(lstat(path_of(sdir, "good"), &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	p = sg_plugin_load(sdir, "good", &err);
	assert_non_null(p);
	assert_ptr_equal(sg_plugin_find("good"), p);
	fmt(want, sizeof(want), "%s/good.so", sdir);
	assert_string_equal(p->path, want);
	fmt(want, sizeof(want), "good: init #1, greeting=hello, host minor %u", SG_PLUGIN_ABI_MINOR);
	assert_string_equal((const char *)p->priv, want);
	/* The mapping is the checked target's. */
	assert_ptr_equal(p->b, dlsym(p->dl, "sg_backend"));
}

static void test_symlink_group_writable(void **state)
{
	char want[2 * PATH_MAX];
	struct stat st;

	(void)state;
	/* The link itself is 0777 as every symlink; its target is 0664. */
	assert_int_equal(stat(path_of(gsdir, "good"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0664);
	/* The message names the file that would be loaded and the link. */
	fmt(want, sizeof(want),
	    "plugin 'good': file '%s/good.so' (the target of '%s/good.so') is writable by group or others: run chmod go-w on it",
	    gdir, gsdir);
	expect_refusal(gsdir, "good", SG_E_PERM, want);
	assert_null(getenv("SG_FAKE_FINI"));
}

static void test_directory_writable(void **state)
{
	struct sg_err err = { 0 };
	char want[2 * PATH_MAX];
	struct stat st;

	(void)state;
	/* Whoever may write the directory may swap the file after the checks. */
	assert_int_equal(stat(ddir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0770);
	fmt(want, sizeof(want),
	    "plugin 'good': directory '%s' is writable by group or others: run chmod go-w on it",
	    ddir);
	expect_refusal(ddir, "good", SG_E_PERM, want);
	/* The same through a symlink from a safe directory: the target's
	 * directory is the one checked. */
	expect_refusal(dsdir, "good", SG_E_PERM, want);
	assert_null(getenv("SG_FAKE_FINI"));
	/* A sticky directory (as /tmp) is fine: others cannot swap our file. */
	assert_int_equal(stat(tdir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 01777);
	assert_non_null(sg_plugin_load(tdir, "good", &err));
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

/* ---- the plugin path --------------------------------------------------------- */

static void expect_path(const char *const *want)
{
	char **v = sg_plugin_path();
	size_t i;

	for (i = 0; want[i]; i++) {
		assert_non_null(v[i]);
		assert_string_equal(v[i], want[i]);
	}
	assert_null(v[i]);
	sg_strv_free(v);
}

static void test_path_order(void **state)
{
	(void)state;
	/* Nothing set: the installed directory alone. */
	expect_path((const char *const[]){ PLUGINDIR, NULL });

	/* dir, then the path in its order, then the installed directory;
	 * empty entries and duplicates are dropped. */
	set("plugin.dir=/d");
	set("plugin.path=/b::/d:/a:/b:");
	expect_path((const char *const[]){ "/d", "/b", "/a", PLUGINDIR, NULL });
	sg_config_reset();

	/* The installed directory named in the path stays where it is named. */
	set("plugin.path=" PLUGINDIR ":/a");
	expect_path((const char *const[]){ PLUGINDIR, "/a", NULL });
	sg_config_reset();

	/* The environment, and --set over it. */
	setenv("SANDGATE_PLUGIN_DIR", "/env-dir", 1);
	setenv("SANDGATE_PLUGIN_PATH", "/env1:/env2", 1);
	expect_path((const char *const[]){ "/env-dir", "/env1", "/env2", PLUGINDIR, NULL });
	set("plugin.path=/cli");
	expect_path((const char *const[]){ "/env-dir", "/cli", PLUGINDIR, NULL });
}

/* ---- discovery and [plugin] load ------------------------------------------------ */

static void test_load_found(void **state)
{
	struct sg_err err = { 0 };
	char names[256], want[3 * PATH_MAX + 256], *log;
	struct sg_plugin *p;

	(void)state;
	fmt(want, sizeof(want), "plugin.dir=%s", p1);
	set(want);
	fmt(want, sizeof(want), "plugin.path=%s", p2);
	set(want);
	sg_log_set_level(SG_LOG_INFO);
	capture_start();
	assert_int_equal(sg_plugin_load_configured(&err), 0);
	log = capture_end();

	/* p1 in name order (badmagic skipped), then p2 (good again skipped);
	 * nothing else unless sandgate is installed in PLUGINDIR. */
	loaded(names, sizeof(names));
	assert_true(strncmp(names, "fakepref good fakeoff", 21) == 0);
	for (p = sg_plugin_first(); p; p = p->next) {
		if (!strcmp(p->b->name, "fakepref"))
			assert_string_equal(p->path, path_of(p1, "fakepref"));
		else if (!strcmp(p->b->name, "good"))
			assert_string_equal(p->path, path_of(p1, "good"));
		else if (!strcmp(p->b->name, "fakeoff"))
			assert_string_equal(p->path, path_of(p2, "fakeoff")); /* a symlink */
		else
			assert_true(strncmp(p->path, PLUGINDIR "/", strlen(PLUGINDIR) + 1) == 0);
	}
	/* The bad file is skipped with the reason, the duplicate is logged. */
	fmt(want, sizeof(want),
	    "warning: skipping %s/badmagic.so: plugin 'badmagic': bad magic 0xdeadbeef (expected 0x53475042): not a sandgate plugin\n",
	    p1);
	assert_non_null(strstr(log, want));
	fmt(want, sizeof(want), "info: plugin 'good' is in %s too: the one in %s counts\n", p2, p1);
	assert_non_null(strstr(log, want));
	free(log);
}

static void test_load_named(void **state)
{
	struct sg_err err = { 0 };
	char names[256], want[3 * PATH_MAX + 256];
	struct sg_plugin *p;

	(void)state;
	fmt(want, sizeof(want), "plugin.dir=%s", p1);
	set(want);
	fmt(want, sizeof(want), "plugin.path=%s", p2);
	set(want);
	/* Only the named ones, in the order named; a name found twice loads
	 * from the first directory. */
	set("plugin.load=fakeoff, good");
	assert_int_equal(sg_plugin_load_configured(&err), 0);
	assert_string_equal(loaded(names, sizeof(names)), "fakeoff good");
	p = sg_plugin_find("good");
	assert_string_equal(p->path, path_of(p1, "good"));
	sg_plugin_unload_all();

	/* A named plugin that fails its checks is an error, not a warning;
	 * the ones before it stay loaded. */
	set("plugin.load=good,badmagic");
	assert_int_equal(sg_plugin_load_configured(&err), -1);
	assert_string_equal(err.msg,
			    "plugin 'badmagic': bad magic 0xdeadbeef (expected 0x53475042): not a sandgate plugin");
	assert_string_equal(loaded(names, sizeof(names)), "good");
	sg_plugin_unload_all();

	/* A name that is nowhere: the message names the whole path. */
	set("plugin.load=good,absent,fakeoff");
	assert_int_equal(sg_plugin_load_configured(&err), -1);
	fmt(want, sizeof(want),
	    "plugin 'absent' ([plugin] load) is not on the plugin path %s:%s:%s: build or install it, or add its directory to [plugin] path",
	    p1, p2, PLUGINDIR);
	assert_string_equal(err.msg, want);
	assert_int_equal(err.code, SG_E_NOTFOUND);
	assert_string_equal(loaded(names, sizeof(names)), "good");
}

/* ---- probes and the default backend ------------------------------------------- */

static void load_three(void)
{
	struct sg_err err = { 0 };

	assert_non_null(sg_plugin_load(dir, "good", &err));
	assert_non_null(sg_plugin_load(dir, "fakepref", &err));
	assert_non_null(sg_plugin_load(dir, "fakeoff", &err));
}

static void expect_json(json_t *got, json_t *want)
{
	char *g = json_dumps(got, JSON_SORT_KEYS), *w = json_dumps(want, JSON_SORT_KEYS);

	assert_non_null(g);
	assert_non_null(w);
	assert_string_equal(g, w);
	free(g);
	free(w);
	json_decref(got);
	json_decref(want);
}

static json_t *probe_entry(const char *name, bool usable, int pref, const char *why, int probes)
{
	char abi[16];
	json_t *o;

	/* the fakes are built with this header */
	snprintf(abi, sizeof(abi), "%u.%u", SG_PLUGIN_ABI_MAJOR, SG_PLUGIN_ABI_MINOR);
	o = json_pack("{s:s, s:s, s:s, s:s, s:b, s:i, s:{s:i}}", "backend", name, "version",
		      "0.0-test", "abi", abi, "path", path_of(dir, name), "usable", usable,
		      "preference", pref, "details", "probes", probes);

	if (why)
		json_object_set_new(o, "why", json_string(why));
	return o;
}

static void test_probe_all(void **state)
{
	(void)state;
	load_three();
	set("good.why=ignored while usable");
	set("fakepref.preference=7");
	set("fakeoff.why=it is a test");
	expect_json(sg_plugin_probe_all(1000),
		    json_pack("[o, o, o]", probe_entry("good", true, 5, NULL, 1),
			      probe_entry("fakepref", true, 7, NULL, 1),
			      probe_entry("fakeoff", false, 5,
					  "fakeoff: it is a test: set [fakeoff] usable = true", 1)));
	/* Each call probes again. */
	set("fakeoff.usable=yes");
	expect_json(sg_plugin_probe_all(1000),
		    json_pack("[o, o, o]", probe_entry("good", true, 5, NULL, 2),
			      probe_entry("fakepref", true, 7, NULL, 2),
			      probe_entry("fakeoff", true, 5, NULL, 2)));
}

static void test_default_by_probe(void **state)
{
	struct sg_err err = { 0 };

	(void)state;
	load_three();
	/* fakeoff would rank first, but it is not usable. */
	set("fakeoff.preference=1000");
	assert_ptr_equal(sg_plugin_default(&err), sg_plugin_find("fakepref"));
	assert_ptr_equal(sg_plugin_default(&err), sg_plugin_find("fakepref"));
	expect_json(sg_plugin_default_report(),
		    json_pack("{s:s, s:s, s:s}", "backend", "fakepref", "source", "probe", "why",
			      "chosen by probe: the usable backend with the highest preference (100); not usable: fakeoff: the fake is switched off: set [fakeoff] usable = true"));
	/* Chosen once: two calls and the report probed each plugin once; this
	 * probe is the second. */
	expect_json(sg_plugin_probe_all(1000),
		    json_pack("[o, o, o]", probe_entry("good", true, 5, NULL, 2),
			      probe_entry("fakepref", true, 100, NULL, 2),
			      probe_entry("fakeoff", false, 1000,
					  "fakeoff: the fake is switched off: set [fakeoff] usable = true", 2)));
}

static void test_default_falls_back(void **state)
{
	struct sg_err err = { 0 };

	(void)state;
	load_three();
	set("fakepref.usable=false");
	assert_ptr_equal(sg_plugin_default(&err), sg_plugin_find("good"));
	expect_json(sg_plugin_default_report(),
		    json_pack("{s:s, s:s, s:s}", "backend", "good", "source", "probe", "why",
			      "chosen by probe: the usable backend with the highest preference (5); not usable: fakepref: the fake is switched off: set [fakepref] usable = true; fakeoff: the fake is switched off: set [fakeoff] usable = true"));
}

static void test_default_none_usable(void **state)
{
	struct sg_err err = { 0 };
	const char *why = "no backend is usable: name one with 'backend', or set [sandbox] default_backend; "
			  "good: down for the test: set [good] usable = true; "
			  "fakepref: the fake is switched off: set [fakepref] usable = true; "
			  "fakeoff: the fake is switched off: set [fakeoff] usable = true";
	char want[1024];

	(void)state;
	load_three();
	set("good.usable=off");
	set("good.why=down for the test");
	set("fakepref.usable=0");
	assert_null(sg_plugin_default(&err));
	assert_int_equal(err.code, SG_E_UNAVAILABLE);
	fmt(want, sizeof(want), "%s", why);
	assert_string_equal(err.msg, want);
	expect_json(sg_plugin_default_report(),
		    json_pack("{s:n, s:s, s:s}", "backend", "source", "probe", "why", why));
}

static void test_default_none_loaded(void **state)
{
	struct sg_err err = { 0 };

	(void)state;
	assert_null(sg_plugin_default(&err));
	assert_string_equal(err.msg,
			    "no backend is usable: name one with 'backend', or set [sandbox] default_backend; no plugin is loaded (see [plugin] path)");
}

static void test_default_configured(void **state)
{
	struct sg_err err = { 0 };

	(void)state;
	load_three();
	/* Taken as is: not usable by its probe, and not probed. */
	set("sandbox.default_backend=fakeoff");
	assert_ptr_equal(sg_plugin_default(&err), sg_plugin_find("fakeoff"));
	expect_json(sg_plugin_default_report(),
		    json_pack("{s:s, s:s, s:s}", "backend", "fakeoff", "source", "configured", "why",
			      "[sandbox] default_backend"));
	expect_json(sg_plugin_probe_all(1000),
		    json_pack("[o, o, o]", probe_entry("good", true, 5, NULL, 1),
			      probe_entry("fakepref", true, 100, NULL, 1),
			      probe_entry("fakeoff", false, 5,
					  "fakeoff: the fake is switched off: set [fakeoff] usable = true", 1)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_header_macros),
		cmocka_unit_test_setup_teardown(test_good_loads, reset, reset),
		cmocka_unit_test_setup_teardown(test_good_sees_set_override, reset, reset),
		cmocka_unit_test_setup_teardown(test_duplicate, reset, reset),
		cmocka_unit_test_setup_teardown(test_actions, reset, reset),
		cmocka_unit_test_setup_teardown(test_badmagic, reset, reset),
		cmocka_unit_test_setup_teardown(test_abimajor, reset, reset),
		cmocka_unit_test_setup_teardown(test_abinewer, reset, reset),
		cmocka_unit_test_setup_teardown(test_small, reset, reset),
		cmocka_unit_test_setup_teardown(test_wrongname, reset, reset),
		cmocka_unit_test_setup_teardown(test_group_flaws, reset, reset),
		cmocka_unit_test_setup_teardown(test_initfails, reset, reset),
		cmocka_unit_test_setup_teardown(test_nosymbol, reset, reset),
		cmocka_unit_test_setup_teardown(test_not_elf, reset, reset),
		cmocka_unit_test_setup_teardown(test_missing_file, reset, reset),
		cmocka_unit_test_setup_teardown(test_not_regular, reset, reset),
		cmocka_unit_test_setup_teardown(test_writable_by_others, reset, reset),
		cmocka_unit_test_setup_teardown(test_symlink_accepted, reset, reset),
		cmocka_unit_test_setup_teardown(test_symlink_group_writable, reset, reset),
		cmocka_unit_test_setup_teardown(test_directory_writable, reset, reset),
		cmocka_unit_test_setup_teardown(test_bad_names, reset, reset),
		cmocka_unit_test_setup_teardown(test_path_order, reset, reset),
		cmocka_unit_test_setup_teardown(test_load_found, reset, reset),
		cmocka_unit_test_setup_teardown(test_load_named, reset, reset),
		cmocka_unit_test_setup_teardown(test_probe_all, reset, reset),
		cmocka_unit_test_setup_teardown(test_default_by_probe, reset, reset),
		cmocka_unit_test_setup_teardown(test_default_falls_back, reset, reset),
		cmocka_unit_test_setup_teardown(test_default_none_usable, reset, reset),
		cmocka_unit_test_setup_teardown(test_default_none_loaded, reset, reset),
		cmocka_unit_test_setup_teardown(test_default_configured, reset, reset),
	};

	return cmocka_run_group_tests_name("plugin", tests, group_setup, group_teardown);
}
