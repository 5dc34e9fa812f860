/*
 * A fake sandgate backend for t/unit/test_plugin.c.  Built once per flaw the
 * loader must refuse (see t/Makefile.inc); the macros below pick the flaw:
 *
 *   FAKE_NAME=stem          file stem and, by default, descriptor name
 *   FAKE_MAGIC=0x...        a wrong magic
 *   FAKE_ABI_MAJOR_BUMP     abi_major = SG_PLUGIN_ABI_MAJOR + 1
 *   FAKE_ABI_MINOR_BUMP     abi_minor = SG_PLUGIN_ABI_MINOR + 1
 *   FAKE_SMALL              size one pointer short of the 1.0 layout
 *   FAKE_DESC_NAME=name     the descriptor names itself differently
 *   FAKE_NO_EXEC            the required exec slot is NULL
 *   FAKE_INIT_FAILS         init() fails with SG_E_UNAVAILABLE and a message
 *   FAKE_HIDDEN             sg_backend is not exported (forgotten SG_EXPORT)
 *
 * init() fills a static text that the test reads through the loader's
 * priv pointer; fini() leaves SG_FAKE_FINI=<name> in the environment so the
 * test can see that sg_plugin_unload_all() called it.
 */
#include <stdio.h>
#include <stdlib.h>

#include <sandgate/plugin.h>

#define FAKE_STR_(x) #x
#define FAKE_STR(x)  FAKE_STR_(x)

#ifndef FAKE_NAME
#error "FAKE_NAME must be defined (the plugin's file stem)"
#endif
#ifndef FAKE_DESC_NAME
#define FAKE_DESC_NAME FAKE_NAME
#endif
#ifndef FAKE_MAGIC
#define FAKE_MAGIC SG_PLUGIN_MAGIC
#endif
#ifdef FAKE_ABI_MAJOR_BUMP
#define FAKE_ABI_MAJOR (SG_PLUGIN_ABI_MAJOR + 1u)
#else
#define FAKE_ABI_MAJOR SG_PLUGIN_ABI_MAJOR
#endif
#ifdef FAKE_ABI_MINOR_BUMP
#define FAKE_ABI_MINOR (SG_PLUGIN_ABI_MINOR + 1u)
#else
#define FAKE_ABI_MINOR SG_PLUGIN_ABI_MINOR
#endif
#ifdef FAKE_SMALL
/* A plugin built against a header that lacked the last 1.0 slot. */
#define FAKE_SIZE ((uint32_t)offsetof(struct sg_backend, config_keys))
#else
#define FAKE_SIZE ((uint32_t)sizeof(struct sg_backend))
#endif
#ifdef FAKE_HIDDEN
#define FAKE_VISIBILITY /* -fvisibility=hidden keeps it out of the dynamic symbols */
#else
#define FAKE_VISIBILITY SG_EXPORT
#endif

static const struct sg_host_api *host;
static int init_calls;
static char state[256];

static int fake_init(const struct sg_host_api *h, void **priv, struct sg_err *err)
{
	host = h;
#ifdef FAKE_INIT_FAILS
	state[0] = '\0';
	*priv = NULL;
	return h->errf(err, SG_E_UNAVAILABLE,
		       "cannot reach the fake backend at fake://nowhere: start it first");
#else
	const char *greeting = h->config_get(FAKE_STR(FAKE_NAME), "greeting");

	init_calls++;
	snprintf(state, sizeof(state), "%s: init #%d, greeting=%s, host minor %u",
		 FAKE_STR(FAKE_NAME), init_calls, greeting ? greeting : "(unset)",
		 (unsigned)h->minor);
	*priv = state;
	(void)err;
	return 0;
#endif
}

static void fake_fini(void *priv)
{
	(void)priv;
	init_calls = 0; /* sanitizer builds never dlclose(): statics survive */
	setenv("SG_FAKE_FINI", FAKE_STR(FAKE_NAME), 1);
}

static int fake_create(void *priv, const struct sg_create_req *req, struct sg_call *call,
		       struct sg_machine *m, struct sg_err *err)
{
	return host->errf(err, SG_E_NOTSUP, "fake backend: no machines");
}

static int fake_destroy(struct sg_machine *m, struct sg_call *call, struct sg_err *err)
{
	return 0;
}

static void fake_release(struct sg_machine *m)
{
}

#ifndef FAKE_NO_EXEC
static int fake_exec(struct sg_machine *m, const struct sg_exec_req *req, struct sg_call *call,
		     struct sg_exec_result *res, struct sg_err *err)
{
	return host->errf(err, SG_E_NOTSUP, "fake backend: no exec");
}
#endif

static int fake_file_read(struct sg_machine *m, const char *path, size_t max,
			  struct sg_call *call, struct sg_buf *out, struct sg_err *err)
{
	return host->errf(err, SG_E_NOTSUP, "fake backend: no files");
}

static int fake_file_write(struct sg_machine *m, const char *path, const void *data,
			   size_t len, const struct sg_write_opts *opts, struct sg_call *call,
			   struct sg_err *err)
{
	return host->errf(err, SG_E_NOTSUP, "fake backend: no files");
}

static int fake_file_list(struct sg_machine *m, const char *path, struct sg_call *call,
			  json_t **entries, struct sg_err *err)
{
	return host->errf(err, SG_E_NOTSUP, "fake backend: no files");
}

static const struct sg_config_key fake_keys[] = {
	{ .key = "greeting", .def = "hello", .help = "a value init() reads back" },
	{ .key = NULL },
};

FAKE_VISIBILITY const struct sg_backend sg_backend = {
	.magic = FAKE_MAGIC,
	.abi_major = FAKE_ABI_MAJOR,
	.abi_minor = FAKE_ABI_MINOR,
	.size = FAKE_SIZE,
	.name = FAKE_STR(FAKE_DESC_NAME),
	.version = "0.0-test",
	.summary = "fake backend for the loader tests",
	.init = fake_init,
	.fini = fake_fini,
	.machine_create = fake_create,
	.machine_destroy = fake_destroy,
	.machine_release = fake_release,
#ifndef FAKE_NO_EXEC
	.exec = fake_exec,
#endif
	.file_read = fake_file_read,
	.file_write = fake_file_write,
	.file_list = fake_file_list,
	.config_keys = fake_keys,
};
