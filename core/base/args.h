/*
 * The argument helpers of the tools: each checks one argument of a tool
 * call's JSON object and, when it is wrong, fills err with a message that
 * names the field and the fix.  Borrowed results point into args.
 */
#ifndef SG_CORE_BASE_ARGS_H
#define SG_CORE_BASE_ARGS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <sandgate/plugin.h>

/* A string argument; *out borrowed from args, NULL when absent. */
int sg_arg_str(json_t *args, const char *name, bool required, const char **out,
	       struct sg_err *err);
/* A whole number within [min, max]; def when absent. */
int sg_arg_uint(json_t *args, const char *name, unsigned def, unsigned min,
		unsigned max, unsigned *out, struct sg_err *err);
/* One of the '|'-separated words of `choices`; def when absent. */
int sg_arg_enum(json_t *args, const char *name, const char *def, const char *choices,
		const char **out, struct sg_err *err);
/* An object of string values -> NULL-terminated "KEY=VALUE" vector (caller
 * frees with sg_strv_free); *out NULL when absent. */
int sg_arg_env(json_t *args, const char *name, char ***out, struct sg_err *err);
/* A boolean; def when absent. */
int sg_arg_bool(json_t *args, const char *name, bool def, bool *out, struct sg_err *err);

/* A JSON string of bytes that may not be UTF-8 (invalid sequences become
 * U+FFFD).  New reference. */
json_t *sg_json_bytes(const char *p, size_t n);

#endif
