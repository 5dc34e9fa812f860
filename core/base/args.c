/* Tool argument helpers (core/base/args.h). */
#include "config.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/args.h"
#include "core/base/err.h"
#include "core/base/util.h"

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a number";
	case JSON_TRUE: case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}

int sg_arg_str(json_t *args, const char *name, bool required, const char **out,
	       struct sg_err *err)
{
	json_t *v = json_object_get(args, name);

	*out = NULL;
	if (!v || (json_is_null(v) && !required)) {
		if (required)
			return sg_errf(err, SG_E_INVAL,
				       "missing required argument '%s': pass it as a string", name);
		return 0;
	}
	if (!json_is_string(v))
		return sg_errf(err, SG_E_INVAL, "argument '%s' must be a string, not %s", name,
			       type_name(v));
	*out = json_string_value(v);
	return 0;
}

int sg_arg_uint(json_t *args, const char *name, unsigned def, unsigned min,
		unsigned max, unsigned *out, struct sg_err *err)
{
	json_t *v = json_object_get(args, name);
	double d;

	*out = def;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_number(v))
		return sg_errf(err, SG_E_INVAL, "argument '%s' must be a whole number, not %s",
			       name, type_name(v));
	d = json_number_value(v);
	if (d != floor(d) || d < min || d > max)
		return sg_errf(err, SG_E_INVAL,
			       "argument '%s' must be a whole number from %u to %u, got %g", name,
			       min, max, d);
	*out = (unsigned)d;
	return 0;
}

int sg_arg_enum(json_t *args, const char *name, const char *def, const char *choices,
		const char **out, struct sg_err *err)
{
	const char *s;
	size_t n;

	if (sg_arg_str(args, name, false, &s, err) < 0)
		return -1;
	*out = s ? s : def;
	if (!s)
		return 0;
	n = strlen(s);
	for (const char *p = choices; *p;) {
		size_t len = strcspn(p, "|");

		if (len == n && strncmp(p, s, n) == 0)
			return 0;
		p += len + (p[len] ? 1 : 0);
	}
	return sg_errf(err, SG_E_INVAL, "argument '%s' must be one of %s, got '%.64s'", name,
		       choices, s);
}

int sg_arg_bool(json_t *args, const char *name, bool def, bool *out, struct sg_err *err)
{
	json_t *v = json_object_get(args, name);

	*out = def;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return sg_errf(err, SG_E_INVAL, "argument '%s' must be true or false, not %s",
			       name, type_name(v));
	*out = json_is_true(v);
	return 0;
}

static bool env_name_ok(const char *k)
{
	if (!*k || !(isalpha((unsigned char)*k) || *k == '_'))
		return false;
	for (; *k; k++)
		if (!(isalnum((unsigned char)*k) || *k == '_'))
			return false;
	return true;
}

int sg_arg_env(json_t *args, const char *name, char ***out, struct sg_err *err)
{
	json_t *v = json_object_get(args, name), *val;
	const char *key;
	char **vec;
	size_t i = 0;

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v))
		return sg_errf(err, SG_E_INVAL,
			       "argument '%s' must be an object of string values, e.g. {\"DEBUG\": \"1\"}",
			       name);
	vec = sg_xcalloc(json_object_size(v) + 1, sizeof(char *));
	json_object_foreach(v, key, val) {
		if (!env_name_ok(key)) {
			sg_strv_free(vec);
			return sg_errf(err, SG_E_INVAL,
				       "argument '%s': '%.64s' is not a valid variable name: use letters, digits and '_', not starting with a digit",
				       name, key);
		}
		if (!json_is_string(val)) {
			sg_strv_free(vec);
			return sg_errf(err, SG_E_INVAL, "argument '%s': the value of '%s' must be a string, not %s",
				       name, key, type_name(val));
		}
		vec[i++] = sg_xasprintf("%s=%s", key, json_string_value(val));
	}
	*out = vec;
	return 0;
}

json_t *sg_json_bytes(const char *p, size_t n)
{
	size_t len;
	char *clean = sg_utf8_sanitize_keep_nul(p ? p : "", p ? n : 0, &len);
	json_t *s = json_stringn(clean, len);

	free(clean);
	return s;
}
