#include "config.h"

#include "core/base/conf.h"
#include "core/base/keys.h"

#define LEVELS "debug|info|notice|warning|error|critical|alert|emergency"

static const struct sg_config_key log_keys[] = {
	{ .key = "level", .def = "info", .accepts = LEVELS,
	  .help = "least severe message written to the log" },
	{ .key = "file", .help = "append the log to this file instead of stderr" },
	{ 0 }
};

static const struct sg_config_key plugin_keys[] = {
	{ .key = "dir",
	  .help = "first directory of the plugin path (backend plugins NAME.so)" },
	{ .key = "path",
	  .help = "further plugin directories, ':'-separated, searched after dir and before the installed plugin directory" },
	{ .key = "load",
	  .help = "comma-separated plugins to load; unset: every plugin found on the plugin path" },
	{ 0 }
};

static const struct sg_config_key sandbox_keys[] = {
	{ .key = "default_backend",
	  .help = "backend of create_sandbox without 'backend' and of lazily created sandboxes; unset: the usable loaded plugin with the highest preference (sandgate config shows the choice)" },
	{ .key = "timeout", .def = "300", .accepts = "uint",
	  .help = "default idle lifetime of a sandbox in seconds" },
	{ .key = "command_timeout", .def = "60", .accepts = "uint",
	  .help = "default run_command timeout in seconds" },
	{ .key = "code_timeout", .def = "30", .accepts = "uint",
	  .help = "default run_code timeout in seconds" },
	{ .key = "output_cap", .def = "16777216", .accepts = "uint",
	  .help = "bytes of stdout and of stderr kept per command (beyond [server] max_result_bytes saved in the sandbox for read_file)" },
	{ .key = "max_file_bytes", .def = "67108864", .accepts = "uint",
	  .help = "largest file read_file and write_file move" },
	{ 0 }
};

static const struct sg_config_key state_keys[] = {
	{ .key = "dir", .help = "state directory (default $XDG_STATE_HOME/sandgate or ~/.local/state/sandgate)" },
	{ 0 }
};

static const struct sg_config_key server_keys[] = {
	{ .key = "host", .def = "127.0.0.1", .help = "address sandgate http listens on" },
	{ .key = "port", .def = "8010", .accepts = "uint", .help = "TCP port of sandgate http" },
	{ .key = "allowed_hosts", .def = "localhost,127.0.0.1,[::1]",
	  .help = "Host header values (any port) and Origin hosts accepted (DNS-rebinding protection)" },
	{ .key = "auth_tokens_file",
	  .help = "bearer tokens, one per line; must not be readable by group or others" },
	{ .key = "ephemeral_token", .def = "false", .accepts = "bool",
	  .help = "generate a bearer token at startup and print it once to stderr, besides any in auth_tokens_file (which may then be missing or empty)" },
	{ .key = "auth", .def = "token", .accepts = "token|none",
	  .help = "token: bearer tokens required (without a token source one is generated and printed once to stderr); none: no authentication, loopback hosts only (logged as a warning)" },
	{ .key = "session_idle_ttl", .def = "3600", .accepts = "uint",
	  .help = "seconds an idle HTTP session lives before it and its sandboxes are reaped" },
	{ .key = "max_sessions", .def = "100", .accepts = "uint",
	  .help = "concurrent HTTP sessions; more get 503" },
	{ .key = "tools", .def = "all", .accepts = "all|cloud|env",
	  .help = "tool families served: all, cloud (the seven sandbox tools) or env (shells, files, sandbox_env, the audit query)" },
	{ .key = "max_connections_per_client", .def = "0", .accepts = "uint",
	  .help = "HTTP connections at once from one client address; 0: half of the connection limit, max(1024, 8 x max_sessions + 64)" },
	{ .key = "request_timeout", .def = "60", .accepts = "uint",
	  .help = "seconds an HTTP client has to send a whole request (headers and body) once its connection is ready for one; trickling does not extend it" },
	{ .key = "max_calls", .def = "256", .accepts = "uint",
	  .help = "tool calls served at once across all sessions" },
	{ .key = "quota_sessions", .def = "32", .accepts = "uint",
	  .help = "sessions one credential (a bearer token) holds at once, below max_sessions; enforced with two or more tokens (quotas keep credentials apart); 0: no quota" },
	{ .key = "quota_calls", .def = "64", .accepts = "uint",
	  .help = "tool calls one credential has in flight at once, below max_calls; 0: no quota" },
	{ .key = "quota_sandboxes", .def = "16", .accepts = "uint",
	  .help = "sandboxes and machines one credential holds at once on this server; 0: no quota" },
	{ .key = "quota_shells", .def = "32", .accepts = "uint",
	  .help = "persistent shells one credential holds at once; 0: no quota" },
	{ .key = "max_result_bytes", .def = "81920", .accepts = "uint",
	  .help = "text one tool result carries inline (about 20k tokens); what is cut is said in its cut field (doc/results.md)" },
	{ .key = "memory_budget", .def = "0", .accepts = "uint",
	  .help = "bytes the calls in flight may hold at once (files read and written, command output, results being built); a call past it waits up to 2 s, then is refused; 0: a quarter of the machine's memory, from 256 MiB to 4 GiB" },
	{ .key = "max_message_bytes", .def = "268435456", .accepts = "uint",
	  .help = "largest JSON-RPC message accepted" },
	{ .key = "max_batch", .def = "100", .accepts = "uint",
	  .help = "messages one JSON-RPC batch may hold (MCP 2025-03-26 only); a larger batch is refused whole; 0: no limit" },
	{ .key = "shutdown_grace", .def = "10", .accepts = "uint",
	  .help = "seconds calls in flight may still finish when a session ends (stdio EOF, HTTP shutdown and DELETE)" },
	{ .key = "shared_machines",
	  .help = "comma-separated machine ids every session may use" },
	{ 0 }
};

static const struct sg_config_key audit_keys[] = {
	{ .key = "log_path",
	  .help = "audit database, one row per tool call (default <state dir>/audit.db); empty: rows go to the log and sandbox_audit_query is not offered" },
	{ 0 }
};

static const struct sg_config_key shell_keys[] = {
	{ .key = "max_output", .def = "50000", .accepts = "uint",
	  .help = "bytes of output sandbox_shell_exec returns by default (head and tail kept)" },
	{ .key = "default_max_output", .accepts = "uint",
	  .help = "the seed's name for max_output, used when max_output is not set" },
	{ .key = "head_size", .def = "5120", .accepts = "uint",
	  .help = "output longer than max_output keeps a head and a tail in the proportion head_size:tail_size" },
	{ .key = "tail_size", .def = "46080", .accepts = "uint",
	  .help = "see head_size (the defaults keep one tenth head, nine tenths tail)" },
	{ .key = "timeout", .def = "30", .accepts = "uint",
	  .help = "seconds sandbox_shell_exec waits by default before answering status running" },
	{ 0 }
};

static const struct sg_config_key default_machine_keys[] = {
	{ .key = "enabled", .def = "false", .accepts = "bool",
	  .help = "make (or find again) a persistent machine when a server starts, before any client is served; failing to is fatal" },
	{ .key = "backend",
	  .help = "its backend; unset: the default backend" },
	{ .key = "name", .def = "admin",
	  .help = "its name (a backend may give a name a layout of its own, as an admin machine's)" },
	{ .key = "purpose", .help = "what it is for, shown by status and machine_list" },
	{ 0 }
};

static const struct sg_config_key files_keys[] = {
	{ .key = "max_file_size", .accepts = "uint",
	  .help = "largest file in bytes sandbox_file_read reads (larger: status too_large) and sandbox_file_write and patch write; default [sandbox] max_file_bytes" },
	{ .key = "default_read_limit", .def = "500", .accepts = "uint",
	  .help = "lines sandbox_file_read returns when the call gives no limit" },
	{ .key = "max_read_limit", .def = "2000", .accepts = "uint",
	  .help = "most lines one sandbox_file_read returns (a larger limit is cut to it)" },
	{ .key = "default_search_limit", .def = "50", .accepts = "uint",
	  .help = "results sandbox_file_search returns when the call gives no limit" },
	{ 0 }
};

void sg_core_keys_register(void)
{
	sg_config_register("audit", audit_keys);
	sg_config_register("shell", shell_keys);
	sg_config_register("files", files_keys);
	sg_config_register("default_machine", default_machine_keys);
	sg_config_register("log", log_keys);
	sg_config_register("plugin", plugin_keys);
	sg_config_register("sandbox", sandbox_keys);
	sg_config_register("state", state_keys);
	sg_config_register("server", server_keys);
}
