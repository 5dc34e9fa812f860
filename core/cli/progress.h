/* The progress line of `sandgate call`: the MCP progress notifications a
 * tool sends, shown on one line of a terminal. */
#ifndef SG_CORE_CLI_PROGRESS_H
#define SG_CORE_CLI_PROGRESS_H

#include <jansson.h>

struct sg_transport_ops;

/* The transport of the command line's session: shows progress
 * notifications on stderr and drops every other message.  Static. */
const struct sg_transport_ops *sg_cli_progress_ops(void);

/* The progress token for the call: a new reference when stdout and stderr
 * are both terminals, else NULL, so that tools send no progress at all and
 * nothing is shown when the output goes to a file or a pipe. */
json_t *sg_cli_progress_token(void);

/* Clears the progress line, if one is shown, before the result is printed. */
void sg_cli_progress_end(void);

#endif
