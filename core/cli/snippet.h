/* The text of one server entry in a client's own format, for the user to
 * paste: JSON (a member of the servers object), TOML (Codex) or YAML
 * (Hermes).  sandgate never edits the TOML and YAML files. */
#ifndef SG_CORE_CLI_SNIPPET_H
#define SG_CORE_CLI_SNIPPET_H

#include <jansson.h>

struct sg_client;

/* The snippet for entry `name` (letters, digits, '_' and '-') whose object
 * is `entry` ({"command", "args", "env"}, borrowed; give the masked one).
 * Caller frees. */
char *sg_snippet(const struct sg_client *c, const char *name, const json_t *entry);

#endif
