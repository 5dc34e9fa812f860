/* Transports compiled into sandgate.  Each turns a byte stream into MCP
 * sessions and back. */
#ifndef SG_TRANSPORTS_TRANSPORT_H
#define SG_TRANSPORTS_TRANSPORT_H

/* Both servers expect SIGTERM, SIGINT and SIGHUP blocked in every thread
 * (sg_stop_block_signals() in main before any thread starts): they read them
 * on a thread of their own (core/server/stop.h).  When they return with
 * calls abandoned (sg_session_abandoned()), the process must end without
 * unloading the plugins (sg_stop_exit_if_abandoned()). */

/* Serves one MCP session over stdin/stdout (newline-delimited JSON-RPC, MCP
 * 2025-11-25 basic/transports "stdio") until EOF, SIGTERM, SIGINT or SIGHUP;
 * then cancels calls in flight (EOF: after [server] shutdown_grace) and
 * destroys the session's ephemeral sandboxes.  Returns the process exit
 * status (0). */
int sg_stdio_run(void);

/* Serves MCP Streamable HTTP (MCP 2025-11-25 basic/transports) on
 * [server] host:port path /mcp until SIGTERM, SIGINT or SIGHUP; then stops
 * accepting, lets calls in flight finish within [server] shutdown_grace,
 * ends every session (destroying their ephemeral sandboxes) and returns the
 * exit status (0, or 3 for a configuration error such as a token file
 * readable by others). */
int sg_http_run(void);

#endif
