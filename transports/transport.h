/* Transports compiled into sandgate.  Each turns a byte stream into MCP
 * sessions and back. */
#ifndef SG_TRANSPORTS_TRANSPORT_H
#define SG_TRANSPORTS_TRANSPORT_H

/* Serves one MCP session over stdin/stdout (newline-delimited JSON-RPC, MCP
 * 2025-11-25 basic/transports "stdio") until EOF, SIGTERM or SIGINT; then
 * cancels calls in flight and destroys the session's ephemeral sandboxes.
 * Returns the process exit status (0). */
int sg_stdio_run(void);

/* Blocks SIGTERM, SIGINT and SIGHUP in the calling thread, which threads
 * started later inherit.  sg_stdio_run() reads them from a signalfd, so
 * call this before any thread starts: a thread that does not block them
 * would die of them. */
void sg_stdio_block_signals(void);

/* Serves MCP Streamable HTTP (MCP 2025-11-25 basic/transports) on
 * [server] host:port path /mcp until SIGTERM or SIGINT; then stops
 * accepting, lets calls in flight finish within [server] shutdown_grace,
 * ends every session (destroying their ephemeral sandboxes) and returns the
 * exit status (0, or 3 for a configuration error such as a token file
 * readable by others). */
int sg_http_run(void);

#endif
