/*
 * Results that say what was cut (doc/results.md).  A tool result holds at
 * most [server] max_result_bytes of text inline; when a field is cut the
 * result gets "truncated": true and "cut": {FIELD: {total_bytes,
 * total_lines, kept_bytes, kept, rest}}, where rest is the call that
 * returns the next missing bytes ({"tool", "arguments"}) or null.
 */
#ifndef SG_CORE_TOOLS_CUT_H
#define SG_CORE_TOOLS_CUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <sandgate/plugin.h>

struct sg_call;
struct sg_entry;

/* Bytes of text one result carries inline: [server] max_result_bytes. */
size_t sg_cut_budget(void);

/* {"tool": tool, "arguments": args}; steals args.  New reference. */
json_t *sg_cut_call(const char *tool, json_t *args);

/* Records that field of result was cut: sets "truncated": true and
 * cut.FIELD = desc (stolen). */
void sg_cut_note(json_t *result, const char *field, json_t *desc);

/* A cut description: total_bytes, total_lines (omitted when < 0),
 * kept_bytes, kept (array of [start, end) byte ranges, stolen, or NULL),
 * rest (stolen; NULL becomes null). */
json_t *sg_cut_desc(uint64_t total_bytes, long long total_lines, uint64_t kept_bytes,
		    json_t *kept, json_t *rest);

/* The command's streams out and err into result's "stdout" and "stderr",
 * within the budget: a stream that does not fit keeps a head and a tail
 * (the [shell] head_size:tail_size proportion) around a marker line, and
 * is saved whole in the machine (/tmp/sandgate-output/, mode 0600) for
 * read_file to page through.  out_capped/err_capped: the backend dropped
 * bytes past [sandbox] output_cap (said as "output_cap_hit"). */
void sg_cut_streams(struct sg_entry *e, struct sg_call *call, json_t *result,
		    const struct sg_buf *out, bool out_capped, const struct sg_buf *err,
		    bool err_capped);

#endif
