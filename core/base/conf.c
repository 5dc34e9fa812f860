#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdatomic.h>

#include <ini.h>

#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/base/log.h"
#include "core/base/util.h"

enum cfg_source { SRC_FILE, SRC_CLI };

struct cfg_entry {
	char *section;
	char *key;
	char *value;
	int line;            /* file line, 0 for --set */
	enum cfg_source src;
	struct cfg_entry *next;
};

struct cfg_section_keys {
	const char *section;
	const struct sg_config_key *keys;
	struct cfg_section_keys *next;
};

extern char **environ;

static struct cfg_entry *entries;      /* file and --set, in order */
/* Registered key tables.  Backends register theirs on the startup thread
 * while the transport already reads values: the list only grows at its head
 * and each node is complete before it is published. */
static struct cfg_section_keys *_Atomic known;
static char *file_path;
static mode_t file_mode;

static struct cfg_entry *entry_add(const char *section, const char *key,
				   const char *value, int line, enum cfg_source src)
{
	struct cfg_entry *e = sg_xcalloc(1, sizeof(*e)), **tail = &entries;

	e->section = sg_xstrdup(section);
	e->key = sg_xstrdup(key);
	e->value = sg_xstrdup(value);
	e->line = line;
	e->src = src;
	while (*tail)
		tail = &(*tail)->next;
	*tail = e;
	return e;
}

static int dots(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '.';
	return n;
}

int sg_config_set_override(const char *assignment, struct sg_err *err)
{
	const char *eq = strchr(assignment, '=');
	const char *dot;
	char *name;
	int ret = -1;

	if (!eq)
		return sg_errf(err, SG_E_INVAL,
			       "--set '%s': expected SECTION.KEY=VALUE, e.g. --set log.level=debug",
			       assignment);
	name = strndup(assignment, (size_t)(eq - assignment));
	if (!name)
		return sg_errf(err, SG_E_NOMEM, "out of memory");
	/* The section is the first dotted part, but see below. */
	dot = strchr(name, '.');
	if (!dot || dot == name || dot[1] == '\0' || strstr(name, "..") ||
	    name[strlen(name) - 1] == '.') {
		sg_errf(err, SG_E_INVAL,
			"--set '%s': expected SECTION.KEY=VALUE, e.g. --set log.level=debug",
			assignment);
		goto out;
	}
	{
		char *section = strndup(name, (size_t)(dot - name));
		const char *key = dot + 1;

		/* A section of a family (a plugin's "NAME.FAMILY.*", such as
		 * [x.target.lab]) has three parts, so with three dots or more the
		 * key is the last part: "x.target.lab.host" is section
		 * "x.target.lab", key "host".  Keys may hold one dot themselves
		 * ("x.template.NAME": section "x", key "template.NAME"). */
		if (dots(name) >= 3) {
			const char *last = strrchr(name, '.');

			free(section);
			section = strndup(name, (size_t)(last - name));
			key = last + 1;
			if (!*key) {
				free(section);
				sg_errf(err, SG_E_INVAL,
					"--set '%s': expected SECTION.KEY=VALUE with a key after the last dot", assignment);
				goto out;
			}
		}
		entry_add(section, key, eq + 1, 0, SRC_CLI);
		free(section);
	}
	ret = 0;
out:
	free(name);
	return ret;
}

/* inih calls the reader once per line, so counting here gives the line the
 * handler is looking at (Debian's inih is built without INI_HANDLER_LINENO).
 * The reader also refuses what inih would take apart silently: a line past
 * its buffer (the rest would be read as a line of its own: a long comment
 * could end in a setting), a NUL byte (the rest of the line would be
 * dropped), an indented line (a continuation: the previous key would get
 * its text as value) and a section name past inih's 49 bytes (cut). */
struct reader_ctx {
	FILE *fp;
	int line;
	char *buf;           /* getline's, freed by sg_config_load() */
	size_t cap;
	const char *bad;     /* why the file was refused at `line`, or NULL */
	int num;             /* the size of inih's line buffer */
};

#define INI_SECTION_MAX 49 /* inih's MAX_SECTION, less its NUL */

/* What is wrong with one line of n bytes (no newline) that inih would read
 * into a buffer of num bytes, or NULL. */
static const char *cfg_line_problem(const char *p, size_t n, int num)
{
	size_t i = 0;

	if (n >= (size_t)num)
		return "line too long";
	if (memchr(p, '\0', n))
		return "a NUL byte in the line";
	/* inih's blanks are isspace()'s: '\v' and '\f' indent too */
	while (i < n && isspace((unsigned char)p[i]))
		i++;
	if (i > 0 && i < n && p[i] != '#' && p[i] != ';')
		return "an indented line";
	if (i < n && p[i] == '[') {
		const char *close = memchr(p + i, ']', n - i);

		if (close && (size_t)(close - (p + i) - 1) > INI_SECTION_MAX)
			return "section name too long";
	}
	return NULL;
}

static char *cfg_reader(char *str, int num, void *stream)
{
	struct reader_ctx *rc = stream;
	ssize_t n = getline(&rc->buf, &rc->cap, rc->fp);

	if (n < 0 || rc->bad)
		return NULL;
	rc->line++;
	rc->num = num;
	if (n > 0 && rc->buf[n - 1] == '\n')
		n--;
	if ((rc->bad = cfg_line_problem(rc->buf, (size_t)n, num)))
		return NULL; /* inih sees the end of the file */
	memcpy(str, rc->buf, (size_t)n);
	str[n] = '\0';
	return str;
}

/* The message for rc->bad, with how to fix it. */
static int cfg_refuse(const struct reader_ctx *rc, const char *path, struct sg_err *err)
{
	if (!strcmp(rc->bad, "line too long"))
		return sg_errf(err, SG_E_INVAL,
			       "%s:%d: line longer than %d bytes, the most the INI reader takes: shorten it, or give the value with --set or its SANDGATE_* variable",
			       path, rc->line, rc->num - 1);
	if (!strcmp(rc->bad, "a NUL byte in the line"))
		return sg_errf(err, SG_E_INVAL, "%s:%d: the line holds a NUL byte: the file must be text",
			       path, rc->line);
	if (!strcmp(rc->bad, "an indented line"))
		return sg_errf(err, SG_E_INVAL,
			       "%s:%d: an indented line: sandgate's INI files have no continuation lines; remove the leading blanks",
			       path, rc->line);
	return sg_errf(err, SG_E_INVAL, "%s:%d: section name longer than %d bytes", path, rc->line,
		       INI_SECTION_MAX);
}

/* A value in double quotes, as a TOML user writes it ("/srv/work", ""),
 * is read without them; \" and \\ inside stand for " and \.  Anything
 * else (no closing quote, text after it) is kept as written.  New string. */
static char *unquote(const char *value)
{
	size_t n = strlen(value), o = 0;
	char *out;

	if (n < 2 || value[0] != '"' || value[n - 1] != '"')
		return sg_xstrdup(value);
	out = sg_xmalloc(n);
	for (size_t i = 1; i + 1 < n; i++) {
		if (value[i] == '\\' && i + 2 < n && (value[i + 1] == '"' || value[i + 1] == '\\'))
			i++;
		else if (value[i] == '"') {
			free(out);
			return sg_xstrdup(value); /* "a" "b": not one quoted value */
		}
		out[o++] = value[i];
	}
	out[o] = '\0';
	return out;
}

static int cfg_handler(void *user, const char *section, const char *name,
		       const char *value)
{
	struct reader_ctx *rc = user;
	char *v = unquote(value);

	entry_add(section, name, v, rc->line, SRC_FILE);
	free(v);
	return 1;
}

static char *default_path(void)
{
	const char *env = getenv("SANDGATE_CONFIG");
	const char *xdg = getenv("XDG_CONFIG_HOME");
	const char *home = getenv("HOME");
	char *p;

	if (env && *env)
		return sg_xstrdup(env);
	if (xdg && *xdg)
		p = sg_xasprintf("%s/sandgate/sandgate.ini", xdg);
	else if (home && *home)
		p = sg_xasprintf("%s/.config/sandgate/sandgate.ini", home);
	else
		p = NULL;
	if (p && access(p, F_OK) == 0)
		return p;
	free(p);
	if (access("/etc/sandgate/sandgate.ini", F_OK) == 0)
		return sg_xstrdup("/etc/sandgate/sandgate.ini");
	return NULL;
}

int sg_config_load(const char *path, struct sg_err *err)
{
	struct reader_ctx rc = { 0 };
	struct stat st;
	char *p = path ? sg_xstrdup(path) : default_path();
	int r;

	if (!p)
		return 0;
	rc.fp = fopen(p, "re");
	if (!rc.fp) {
		sg_errf(err, SG_E_IO, "cannot read config file '%s': %s", p, strerror(errno));
		free(p);
		return -1;
	}
	if (fstat(fileno(rc.fp), &st) == 0)
		file_mode = st.st_mode;
	r = ini_parse_stream(cfg_reader, &rc, cfg_handler, &rc);
	fclose(rc.fp);
	free(rc.buf);
	free(file_path);
	file_path = p;
	if (rc.bad)
		return cfg_refuse(&rc, p, err);
	if (r != 0)
		return sg_errf(err, SG_E_INVAL,
			       "%s:%d: not valid INI: expected '[section]', 'key = value' or a comment",
			       p, r);
	return 0;
}

void sg_config_register(const char *section, const struct sg_config_key *keys)
{
	struct cfg_section_keys *s = sg_xcalloc(1, sizeof(*s));

	s->section = section;
	s->keys = keys;
	s->next = atomic_load(&known);
	atomic_store_explicit(&known, s, memory_order_release);
}

void sg_config_env_name(const char *section, const char *key, char *out, size_t n)
{
	size_t o = 0;
	const char *parts[2] = { section, key };

	o = (size_t)snprintf(out, n, "SANDGATE_");
	for (int i = 0; i < 2; i++) {
		for (const char *c = parts[i]; *c && o + 3 < n; c++) {
			if (*c == '.' || *c == '-') {
				out[o++] = '_';
				out[o++] = '_';
			} else {
				out[o++] = (char)toupper((unsigned char)*c);
			}
		}
		if (i == 0 && o + 1 < n)
			out[o++] = '_';
	}
	out[o < n ? o : n - 1] = '\0';
}

static bool key_matches(const char *pattern, const char *key)
{
	size_t n = strlen(pattern);

	if (n > 0 && pattern[n - 1] == '*')
		return strncmp(pattern, key, n - 1) == 0;
	return strcmp(pattern, key) == 0;
}

/* The registered section for a name; "x.target.NAME" sections use the
 * table registered as "x.target.*". */
static const struct cfg_section_keys *find_section(const char *section)
{
	for (const struct cfg_section_keys *s = atomic_load_explicit(&known, memory_order_acquire); s; s = s->next) {
		size_t n = strlen(s->section);

		if (strcmp(s->section, section) == 0)
			return s;
		if (n > 1 && s->section[n - 1] == '*' &&
		    strncmp(s->section, section, n - 1) == 0 && section[n - 1])
			return s;
	}
	return NULL;
}

static const struct sg_config_key *find_key(const char *section, const char *key)
{
	const struct cfg_section_keys *s = find_section(section);

	if (!s)
		return NULL;
	for (const struct sg_config_key *k = s->keys; k->key; k++)
		if (key_matches(k->key, key))
			return k;
	return NULL;
}

static const struct cfg_entry *last_entry(const char *section, const char *key,
					  enum cfg_source src)
{
	const struct cfg_entry *found = NULL;

	for (const struct cfg_entry *e = entries; e; e = e->next)
		if (e->src == src && strcmp(e->section, section) == 0 &&
		    strcmp(e->key, key) == 0)
			found = e;
	return found;
}

/* The first set seed variable of k ("A:B"), or NULL; *name gets its name. */
static const char *seed_env(const struct sg_config_key *k, char *name, size_t n)
{
	const char *p;

	if (!k || !k->env)
		return NULL;
	for (p = k->env; *p;) {
		const char *end = strchr(p, ':');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *v;

		if (len < n) {
			memcpy(name, p, len);
			name[len] = '\0';
			v = getenv(name);
			if (v && *v)
				return v;
		}
		p += len + (end ? 1 : 0);
	}
	return NULL;
}

/* A resolution scans the entries, the environment and the key tables, and
 * a tool call reads several keys; once frozen (a server is running: no
 * setenv, no reload) the value of a registered key cannot change, so it is
 * remembered.  Keys registered later (a backend loading) are resolved
 * afresh until then.  Slots are never removed before sg_config_reset(). */
#define MEMO_SLOTS 256
struct memo {
	char *section, *key; /* NULL: free slot */
	const char *value;
};
static struct memo memo[MEMO_SLOTS];
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool frozen;

void sg_config_freeze(void)
{
	atomic_store(&frozen, true);
}

static unsigned memo_hash(const char *section, const char *key)
{
	unsigned h = 2166136261u; /* FNV-1a */

	for (const char *p = section; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	h = (h ^ '.') * 16777619u;
	for (const char *p = key; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return h;
}

/* The remembered slot of section.key, or the free slot where it belongs,
 * or NULL when the table is full.  Called with memo_lock held. */
static struct memo *memo_slot(const char *section, const char *key)
{
	unsigned h = memo_hash(section, key);

	for (unsigned i = 0; i < MEMO_SLOTS; i++) {
		struct memo *m = &memo[(h + i) % MEMO_SLOTS];

		if (!m->section || (!strcmp(m->section, section) && !strcmp(m->key, key)))
			return m;
	}
	return NULL;
}

static void memo_clear(void)
{
	pthread_mutex_lock(&memo_lock);
	for (unsigned i = 0; i < MEMO_SLOTS; i++) {
		if (!memo[i].section)
			continue;
		free(memo[i].section);
		free(memo[i].key);
		memo[i] = (struct memo){ 0 };
	}
	atomic_store(&frozen, false);
	pthread_mutex_unlock(&memo_lock);
}

static const char *resolve(const char *section, const char *key);

const char *sg_config_get(const char *section, const char *key)
{
	struct memo *m;
	const char *v;

	if (!atomic_load(&frozen))
		return resolve(section, key);
	pthread_mutex_lock(&memo_lock);
	m = memo_slot(section, key);
	if (m && m->section) {
		v = m->value;
		pthread_mutex_unlock(&memo_lock);
		return v;
	}
	v = resolve(section, key);
	if (m && find_key(section, key)) {
		m->section = sg_xstrdup(section);
		m->key = sg_xstrdup(key);
		m->value = v;
	}
	pthread_mutex_unlock(&memo_lock);
	return v;
}

static const char *resolve(const char *section, const char *key)
{
	const struct cfg_entry *e = last_entry(section, key, SRC_CLI);
	const struct sg_config_key *k;
	char name[256];
	const char *v;

	if (e)
		return e->value;
	sg_config_env_name(section, key, name, sizeof(name));
	v = getenv(name);
	if (v)
		return v;
	k = find_key(section, key);
	v = seed_env(k, name, sizeof(name));
	if (v)
		return v;
	e = last_entry(section, key, SRC_FILE);
	if (e)
		return e->value;
	return k ? k->def : NULL;
}

const char *sg_config_source(const char *section, const char *key)
{
	static __thread char buf[512];
	const struct cfg_entry *e = last_entry(section, key, SRC_CLI);
	char name[256];

	if (e)
		return "--set";
	sg_config_env_name(section, key, name, sizeof(name));
	if (getenv(name)) {
		snprintf(buf, sizeof(buf), "environment %s", name);
		return buf;
	}
	if (seed_env(find_key(section, key), name, sizeof(name))) {
		snprintf(buf, sizeof(buf), "environment %s", name);
		return buf;
	}
	e = last_entry(section, key, SRC_FILE);
	if (e) {
		snprintf(buf, sizeof(buf), "%s:%d", file_path, e->line);
		return buf;
	}
	return "default";
}

/* Checks value against k->accepts; returns a description of what is accepted
 * when it does not fit, NULL when it does. */
static const char *check_value(const struct sg_config_key *k, const char *value)
{
	char *end;

	if (!k->accepts)
		return NULL;
	if (strcmp(k->accepts, "uint") == 0) {
		errno = 0;
		if (!*value || !isdigit((unsigned char)*value) ||
		    (strtoull(value, &end, 10), errno) || *end)
			return "a whole number (0 or more)";
		return NULL;
	}
	if (strcmp(k->accepts, "bool") == 0) {
		static const char *const ok[] = { "true", "false", "yes", "no", "on", "off", "1", "0" };

		for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
			if (strcasecmp(value, ok[i]) == 0)
				return NULL;
		return "true or false";
	}
	for (const char *p = k->accepts; *p;) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);

		if (strlen(value) == len && strncmp(p, value, len) == 0)
			return NULL;
		p += len + (bar ? 1 : 0);
	}
	return k->accepts;
}

static int validate_one(const char *where, const char *section, const char *key,
			const char *value, bool from_file, struct sg_err *err)
{
	const struct sg_config_key *k;
	const char *accepted;

	if (!find_section(section)) {
		SG_WARN("%s: unknown section [%s] ignored", where, section);
		return 0;
	}
	k = find_key(section, key);
	if (!k) {
		SG_WARN("%s: unknown key '%s' in [%s] ignored", where, key, section);
		return 0;
	}
	accepted = check_value(k, value);
	if (accepted)
		return sg_errf(err, SG_E_INVAL, "%s: [%s] %s = '%s' is not valid: expected %s",
			       where, section, key, k->secret ? "(hidden)" : value, accepted);
	if (k->secret && from_file && (file_mode & 077))
		return sg_errf(err, SG_E_PERM,
			       "%s: [%s] %s is a secret but '%s' is readable by others: run chmod 600 '%s' or pass it in the environment",
			       where, section, key, file_path, file_path);
	return 0;
}

/* SANDGATE_SSH__TARGET__LAB_PORT for a section registered as
 * "x.target.*": the variable's tail names the key. */
static int validate_wildcard_env(struct sg_err *err)
{
	for (const struct cfg_section_keys *s = atomic_load_explicit(&known, memory_order_acquire);
	     s; s = s->next) {
		char stem[256], where[300];
		size_t slen = strlen(s->section);

		if (slen < 2 || s->section[slen - 1] != '*')
			continue;
		sg_config_env_name(s->section, "", stem, sizeof(stem));
		/* "SANDGATE_SSH__TARGET__*_" -> "SANDGATE_SSH__TARGET__" */
		stem[strlen(stem) - 2] = '\0';
		for (char **ep = environ; ep && *ep; ep++) {
			const char *eq = strchr(*ep, '=');

			if (!eq || strncmp(*ep, stem, strlen(stem)) != 0)
				continue;
			for (const struct sg_config_key *k = s->keys; k->key; k++) {
				char tail[128];
				size_t tl, nl = (size_t)(eq - *ep);
				const char *accepted;

				sg_config_env_name("", k->key, tail, sizeof(tail));
				/* "SANDGATE__PORT" -> "_PORT" */
				memmove(tail, tail + 9, strlen(tail + 9) + 1);
				tl = strlen(tail);
				if (nl <= tl + strlen(stem) || strncmp(*ep + nl - tl, tail, tl) != 0)
					continue;
				accepted = check_value(k, eq + 1);
				snprintf(where, sizeof(where), "environment %.*s", (int)nl, *ep);
				if (accepted)
					return sg_errf(err, SG_E_INVAL,
						       "%s: %s = '%s' is not valid: expected %s", where,
						       k->key, k->secret ? "(hidden)" : eq + 1, accepted);
			}
		}
	}
	return 0;
}

int sg_config_validate(struct sg_err *err)
{
	char where[600];

	for (const struct cfg_entry *e = entries; e; e = e->next) {
		if (e->src == SRC_FILE)
			snprintf(where, sizeof(where), "%s:%d", file_path, e->line);
		else
			snprintf(where, sizeof(where), "--set %s.%s", e->section, e->key);
		if (validate_one(where, e->section, e->key, e->value, e->src == SRC_FILE, err) < 0)
			return -1;
	}
	if (validate_wildcard_env(err) < 0)
		return -1;
	/* Values from SANDGATE_* variables of registered keys. */
	for (const struct cfg_section_keys *s = atomic_load_explicit(&known, memory_order_acquire); s; s = s->next) {
		if (strchr(s->section, '*'))
			continue;
		for (const struct sg_config_key *k = s->keys; k->key; k++) {
			char name[256];
			const char *v;

			if (strchr(k->key, '*'))
				continue;
			sg_config_env_name(s->section, k->key, name, sizeof(name));
			v = getenv(name);
			if (!v)
				v = seed_env(k, name, sizeof(name));
			if (!v)
				continue;
			snprintf(where, sizeof(where), "environment %s", name);
			if (validate_one(where, s->section, k->key, v, false, err) < 0)
				return -1;
		}
	}
	return 0;
}

/* "SANDGATE_<SECTION>_<KEY>": whether SECTION (its first word) is one
 * nobody registered.  Words are separated by '_'; "__" stands for '.'. */
static bool env_section_unregistered(const char *var)
{
	const char *p = var + 9, *end;
	char sec[64];
	size_t n = 0;

	end = strchr(p, '=');
	if (!end || !strchr(p, '_') || strchr(p, '_') > end)
		return false; /* SANDGATE_BIN: not a configuration variable */
	for (; p < end && *p != '_' && n + 1 < sizeof(sec); p++)
		sec[n++] = (char)tolower((unsigned char)*p);
	sec[n] = '\0';
	return n > 0 && !find_section(sec);
}

bool sg_config_sets_unregistered(void)
{
	for (const struct cfg_entry *e = entries; e; e = e->next)
		if (!find_section(e->section))
			return true;
	for (char **ep = environ; ep && *ep; ep++)
		if (!strncmp(*ep, "SANDGATE_", 9) && env_section_unregistered(*ep))
			return true;
	return false;
}

long long sg_config_int(const char *section, const char *key, long long def)
{
	const char *v = sg_config_get(section, key);
	char *end;
	long long n;

	if (!v || !*v)
		return def;
	errno = 0;
	n = strtoll(v, &end, 10);
	if (errno || *end)
		return def;
	return n;
}

bool sg_config_bool(const char *section, const char *key, bool def)
{
	const char *v = sg_config_get(section, key);

	if (!v || !*v)
		return def;
	if (!strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on") ||
	    !strcmp(v, "1"))
		return true;
	if (!strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off") ||
	    !strcmp(v, "0"))
		return false;
	return def;
}

/* True when the variable name[0..n) is the SANDGATE_ name of a key that
 * the file or --set already gave for section: that key was reported. */
static bool env_names_entry(const char *section, const char *name, size_t n)
{
	char en[256];

	for (const struct cfg_entry *e = entries; e; e = e->next) {
		if (strcmp(e->section, section))
			continue;
		sg_config_env_name(section, e->key, en, sizeof(en));
		if (strlen(en) == n && strncmp(en, name, n) == 0)
			return true;
	}
	return false;
}

void sg_config_each(const char *section, const char *prefix,
		    void (*fn)(const char *key, const char *value, void *ud), void *ud)
{
	char envp[256];
	size_t plen = strlen(prefix), elen;

	/* File and --set keys, each once, with the effective value. */
	for (const struct cfg_entry *e = entries; e; e = e->next) {
		bool seen = false;

		if (strcmp(e->section, section) || strncmp(e->key, prefix, plen))
			continue;
		for (const struct cfg_entry *f = entries; f != e; f = f->next)
			if (!strcmp(f->section, section) && !strcmp(f->key, e->key))
				seen = true;
		if (!seen)
			fn(e->key, sg_config_get(section, e->key), ud);
	}
	/* SANDGATE_<SECTION>_<PREFIX>NAME variables not already named above. */
	sg_config_env_name(section, prefix, envp, sizeof(envp));
	elen = strlen(envp);
	for (char **ep = environ; ep && *ep; ep++) {
		const char *eq = strchr(*ep, '=');
		char key[256];
		size_t n;

		if (!eq || strncmp(*ep, envp, elen) != 0 || (size_t)(eq - *ep) <= elen)
			continue;
		n = (size_t)snprintf(key, sizeof(key), "%s", prefix);
		for (const char *c = *ep + elen; c < eq && n + 1 < sizeof(key); c++)
			key[n++] = (char)tolower((unsigned char)*c);
		key[n] = '\0';
		if (!env_names_entry(section, *ep, (size_t)(eq - *ep)))
			fn(key, eq + 1, ud);
	}
}

void sg_config_each_key(void (*fn)(const char *section, const struct sg_config_key *k,
				   const char *value, const char *source, void *ud),
			void *ud)
{
	const struct cfg_section_keys *order[64];
	size_t n = 0;

	/* The list is newest first; registration order reads better. */
	for (const struct cfg_section_keys *s = atomic_load_explicit(&known, memory_order_acquire);
	     s && n < sizeof(order) / sizeof(order[0]); s = s->next)
		order[n++] = s;
	while (n-- > 0) {
		const struct cfg_section_keys *s = order[n];

		for (const struct sg_config_key *k = s->keys; k->key; k++) {
			bool wild = strchr(k->key, '*') || strchr(s->section, '*');
			const char *v = wild ? NULL : sg_config_get(s->section, k->key);

			fn(s->section, k, k->secret && v ? (*v ? "(set)" : "") : v,
			   wild ? "" : sg_config_source(s->section, k->key), ud);
		}
	}
}

const char *sg_config_file(void)
{
	return file_path;
}

void sg_config_reset(void)
{
	memo_clear();
	while (entries) {
		struct cfg_entry *e = entries;

		entries = e->next;
		free(e->section);
		free(e->key);
		free(e->value);
		free(e);
	}
	for (struct cfg_section_keys *s = atomic_exchange(&known, NULL), *n; s; s = n) {
		n = s->next;
		free(s);
	}
	free(file_path);
	file_path = NULL;
	file_mode = 0;
}
