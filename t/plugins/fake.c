/*
 * A fake sandgate backend (plugin ABI 2.0) for t/unit/test_plugin.c and
 * t/e2e/t0010-plugin-path.mjs.  Built once per variant (see t/Makefile.inc);
 * the macros below pick it:
 *
 *   FAKE_NAME=stem          file stem and, by default, descriptor name
 *   FAKE_MAGIC=0x...        a wrong magic
 *   FAKE_ABI_MAJOR_BUMP     abi_major = SG_PLUGIN_ABI_MAJOR + 1
 *   FAKE_ABI_MINOR_BUMP     abi_minor = SG_PLUGIN_ABI_MINOR + 1
 *   FAKE_SMALL              size one pointer short of the 2.0 layout
 *   FAKE_DESC_NAME=name     the descriptor names itself differently
 *   FAKE_NO_EXEC            the required exec group is missing
 *   FAKE_NO_FILE_STAT       the files group is partly filled (no file_stat)
 *   FAKE_HALF_STREAM        the stream group has stream_open and stream_read only
 *   FAKE_STATUS_NO_STREAM   the status group is there, the stream group is not
 *   FAKE_BAD_ACTION         an action without handler
 *   FAKE_ACTIONS            one good action, "<name>_hello"
 *   FAKE_INIT_FAILS         init() fails with SG_E_UNAVAILABLE and a message
 *   FAKE_HIDDEN             sg_backend is not exported (forgotten SG_EXPORT)
 *   FAKE_PREFERENCE=N       default of [<name>] preference (5)
 *   FAKE_OFF                default of [<name>] usable is "false" (else "true")
 *   FAKE_WORKS              machines and commands that work, at no cost: for
 *                           the tests and benchmarks of the core's own path
 *                           (t2060, t3009, bench/audit_cost.sh).  exec
 *                           answers "ok\n", except for the command "hang",
 *                           which never returns and ignores cancellation (a
 *                           stuck backend call); file_write reads every byte
 *                           and keeps nothing; file_read gives "fake\n".
 *
 * Every required group is filled with stubs: machine_create fails with
 * SG_E_NOTSUP, so a call that reaches the fake says which plugin it reached.
 * probe() reads [<name>] preference, usable and why, so a test chooses what
 * it says.  init() fills a static text that the test reads through the
 * loader's priv pointer; fini() leaves SG_FAKE_FINI=<name> in the
 * environment so the test can see that sg_plugin_unload_all() called it.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <sandgate/plugin.h>

#define FAKE_STR_(x) #x
#define FAKE_STR(x)  FAKE_STR_(x)

#ifndef FAKE_NAME
#error "FAKE_NAME must be defined (the plugin's file stem)"
#endif
#define FAKE_STEM FAKE_STR(FAKE_NAME)
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
/* A plugin built against a header that lacked the last 2.0 slot. */
#define FAKE_SIZE ((uint32_t)(SG_BACKEND_SIZE_2_0 - sizeof(void *)))
#else
#define FAKE_SIZE ((uint32_t)sizeof(struct sg_backend))
#endif
#ifdef FAKE_HIDDEN
#define FAKE_VISIBILITY /* -fvisibility=hidden keeps it out of the dynamic symbols */
#else
#define FAKE_VISIBILITY SG_EXPORT
#endif
#ifndef FAKE_PREFERENCE
#define FAKE_PREFERENCE 5
#endif
#ifdef FAKE_OFF
#define FAKE_USABLE "false"
#else
#define FAKE_USABLE "true"
#endif

static const struct sg_host_api *host;
static int init_calls;
static atomic_int probe_calls;
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
	const char *greeting = h->config_get(FAKE_STEM, "greeting");

	init_calls++;
	snprintf(state, sizeof(state), "%s: init #%d, greeting=%s, host minor %u", FAKE_STEM,
		 init_calls, greeting ? greeting : "(unset)", (unsigned)h->minor);
	*priv = state;
	(void)err;
	return 0;
#endif
}

static void fake_fini(void *priv)
{
	(void)priv;
	/* Sanitizer builds never dlclose(): statics survive into the next load. */
	init_calls = 0;
	atomic_store(&probe_calls, 0);
	setenv("SG_FAKE_FINI", FAKE_STEM, 1);
}

/* Usable or not as [<name>] usable says; details count the probes, so a
 * test can tell how often the core asked. */
static int fake_probe(void *priv, unsigned timeout_ms, struct sg_probe *out, struct sg_err *err)
{
	const char *pref = host->config_get(FAKE_STEM, "preference");
	const char *usable = host->config_get(FAKE_STEM, "usable");
	const char *why = host->config_get(FAKE_STEM, "why");
	int n = atomic_fetch_add(&probe_calls, 1) + 1;

	out->preference = pref ? atoi(pref) : 0;
	out->details = json_pack("{s:i}", "probes", n);
	if (usable && (!strcasecmp(usable, "true") || !strcasecmp(usable, "yes") ||
		       !strcasecmp(usable, "on") || !strcmp(usable, "1")))
		return 0;
	return host->errf(err, SG_E_UNAVAILABLE, "%s: %s: set [%s] usable = true", FAKE_STEM,
			  why ? why : "", FAKE_STEM);
}

#ifdef FAKE_WORKS
static atomic_int machines_made;

static int fake_create(void *priv, const struct sg_create_req *req, struct sg_call *call,
		       struct sg_machine *m, struct sg_err *err)
{
	int n = atomic_fetch_add(&machines_made, 1) + 1;

	if (host->machine_set(m, SG_MACHINE_ID, "%s-%ld-%d", FAKE_STEM, (long)getpid(), n) < 0 ||
	    host->machine_set(m, SG_MACHINE_WORKSPACE, "/work") < 0)
		return host->errf(err, SG_E_INTERNAL, "fake backend %s: machine_set failed", FAKE_STEM);
	return 0;
}
#else
static int fake_create(void *priv, const struct sg_create_req *req, struct sg_call *call,
		       struct sg_machine *m, struct sg_err *err)
{
	return host->errf(err, SG_E_NOTSUP, "fake backend %s: no machines", FAKE_STEM);
}
#endif

static int fake_attach(void *priv, const char *id, const json_t *kept, struct sg_call *call,
		       struct sg_machine *m, struct sg_err *err)
{
	return host->errf(err, SG_E_NOTFOUND, "fake backend %s: no machine '%s'", FAKE_STEM, id);
}

static int fake_destroy(struct sg_machine *m, struct sg_call *call, struct sg_err *err)
{
	return 0;
}

static void fake_release(struct sg_machine *m)
{
}

static int fake_list(void *priv, struct sg_call *call, json_t **machines, struct sg_err *err)
{
	*machines = json_array();
	return *machines ? 0 : host->errf(err, SG_E_NOMEM, "fake backend %s: out of memory",
					  FAKE_STEM);
}

#if defined(FAKE_WORKS)
static int fake_exec(struct sg_machine *m, const struct sg_exec_req *req, struct sg_call *call,
		     struct sg_exec_result *res, struct sg_err *err)
{
	if (req->command && !strcmp(req->command, "hang"))
		for (;;)
			sleep(3600); /* stuck: no poll of the cancel fd, no return */
	res->exit_code = 0;
	return host->buf_append(&res->out, "ok\n", 3) < 0
		       ? host->errf(err, SG_E_NOMEM, "fake backend %s: out of memory", FAKE_STEM) : 0;
}
#elif !defined(FAKE_NO_EXEC)
static int fake_exec(struct sg_machine *m, const struct sg_exec_req *req, struct sg_call *call,
		     struct sg_exec_result *res, struct sg_err *err)
{
	return host->errf(err, SG_E_NOTSUP, "fake backend %s: no exec", FAKE_STEM);
}
#endif

#if defined(FAKE_HALF_STREAM)
static int fake_stream_open(struct sg_machine *m, const struct sg_exec_req *req,
			    struct sg_stream **out, struct sg_err *err)
{
	return host->errf(err, SG_E_NOTSUP, "fake backend %s: no streams", FAKE_STEM);
}

static ssize_t fake_stream_read(struct sg_stream *s, void *p, size_t n, int timeout_ms,
				struct sg_err *err)
{
	return host->errf(err, SG_E_NOTSUP, "fake backend %s: no streams", FAKE_STEM);
}
#endif

#if defined(FAKE_STATUS_NO_STREAM)
static int fake_stream_open_status(struct sg_machine *m, const struct sg_exec_req *req,
				   int status_fd, struct sg_stream **out, struct sg_err *err)
{
	return host->errf(err, SG_E_NOTSUP, "fake backend %s: no streams", FAKE_STEM);
}

static ssize_t fake_stream_read_ch(struct sg_stream *s, void *p, size_t n, int timeout_ms,
				   int *channel, struct sg_err *err)
{
	return host->errf(err, SG_E_NOTSUP, "fake backend %s: no streams", FAKE_STEM);
}
#endif

#ifdef FAKE_WORKS
static int fake_file_read(struct sg_machine *m, const char *path, size_t max,
			  struct sg_call *call, struct sg_buf *out, struct sg_err *err)
{
	return host->buf_append(out, "fake\n", 5) < 0
		       ? host->errf(err, SG_E_NOMEM, "fake backend %s: out of memory", FAKE_STEM) : 0;
}

/* Reads every byte (as a backend sending them would) and keeps none. */
static volatile unsigned char file_sum;

static int fake_file_write(struct sg_machine *m, const char *path, const void *data,
			   size_t len, const struct sg_write_opts *opts, struct sg_call *call,
			   struct sg_err *err)
{
	const unsigned char *p = data;
	unsigned char sum = 0;

	for (size_t i = 0; i < len; i++)
		sum ^= p[i];
	file_sum = sum;
	return 0;
}
#else
static int fake_file_read(struct sg_machine *m, const char *path, size_t max,
			  struct sg_call *call, struct sg_buf *out, struct sg_err *err)
{
	return host->errf(err, SG_E_NOTSUP, "fake backend %s: no files", FAKE_STEM);
}

static int fake_file_write(struct sg_machine *m, const char *path, const void *data,
			   size_t len, const struct sg_write_opts *opts, struct sg_call *call,
			   struct sg_err *err)
{
	return host->errf(err, SG_E_NOTSUP, "fake backend %s: no files", FAKE_STEM);
}
#endif

static int fake_file_list(struct sg_machine *m, const char *path, struct sg_call *call,
			  json_t **entries, struct sg_err *err)
{
	return host->errf(err, SG_E_NOTSUP, "fake backend %s: no files", FAKE_STEM);
}

#ifndef FAKE_NO_FILE_STAT
static int fake_file_stat(struct sg_machine *m, const char *path, struct sg_call *call,
			  struct sg_stat *st, struct sg_err *err)
{
	return host->errf(err, SG_E_NOTSUP, "fake backend %s: no files", FAKE_STEM);
}
#endif

static int fake_file_remove(struct sg_machine *m, const char *path, bool recursive,
			    struct sg_call *call, struct sg_err *err)
{
	return host->errf(err, SG_E_NOTSUP, "fake backend %s: no files", FAKE_STEM);
}

#if defined(FAKE_ACTIONS) || defined(FAKE_BAD_ACTION)
#ifdef FAKE_ACTIONS
/* {"hello": params.name, or "world"} */
static int fake_hello(void *priv, struct sg_machine *machine, const json_t *params,
		      struct sg_call *call, json_t **result, struct sg_err *err)
{
	const char *name = json_string_value(json_object_get(params, "name"));

	*result = json_pack("{s:s}", "hello", name ? name : "world");
	return *result ? 0 : host->errf(err, SG_E_NOMEM, "fake backend %s: out of memory",
					FAKE_STEM);
}
#endif

static const struct sg_action fake_actions[] = {
	{
		.name = FAKE_STEM "_hello",
		.summary = "greets the name given, or the world",
		.params_schema = "{\"type\": \"object\", \"properties\": "
				 "{\"name\": {\"type\": \"string\"}}}",
		.example = "{\"name\": \"you\"}",
#ifdef FAKE_ACTIONS
		.handler = fake_hello,
#endif
	},
};
#define FAKE_ACTION_TABLE fake_actions
#define FAKE_N_ACTIONS (sizeof(fake_actions) / sizeof(fake_actions[0]))
#else
#define FAKE_ACTION_TABLE NULL
#define FAKE_N_ACTIONS 0
#endif

static const struct sg_config_key fake_keys[] = {
	{ .key = "greeting", .def = "hello", .help = "a value init() reads back" },
	{ .key = "preference", .def = FAKE_STR(FAKE_PREFERENCE), .accepts = "uint",
	  .help = "the preference probe() reports" },
	{ .key = "usable", .def = FAKE_USABLE, .accepts = "bool",
	  .help = "whether probe() says the fake is usable" },
	{ .key = "why", .def = "the fake is switched off",
	  .help = "what probe() says when it is not usable" },
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
	.config_keys = fake_keys,
	.init = fake_init,
	.fini = fake_fini,
	.probe = fake_probe,
	.machine_create = fake_create,
	.machine_attach = fake_attach,
	.machine_destroy = fake_destroy,
	.machine_release = fake_release,
	.machine_list = fake_list,
#ifndef FAKE_NO_EXEC
	.exec = fake_exec,
#endif
#ifdef FAKE_HALF_STREAM
	.stream_open = fake_stream_open,
	.stream_read = fake_stream_read,
#endif
#ifdef FAKE_STATUS_NO_STREAM
	.stream_open_status = fake_stream_open_status,
	.stream_read_ch = fake_stream_read_ch,
#endif
	.file_read = fake_file_read,
	.file_write = fake_file_write,
	.file_list = fake_file_list,
#ifndef FAKE_NO_FILE_STAT
	.file_stat = fake_file_stat,
#endif
	.file_remove = fake_file_remove,
	.actions = FAKE_ACTION_TABLE,
	.n_actions = FAKE_N_ACTIONS,
};
