/*
 * Conformance fixture mode: the tools the official MCP conformance suite
 * (@modelcontextprotocol/conformance 0.1.16, server scenarios tools-call-*
 * and the pending json-schema-2020-12) calls by name.  Test only: they are
 * linked into t/conformance/sandgate-conformance, a build of sandgate for
 * the conformance run, never into the sandgate that is installed.
 *
 * Each result is an object holding only "_content": sg_tool_call() then
 * returns exactly those content blocks (no JSON text block, no
 * structuredContent), which is what the scenarios describe (MCP 2025-11-25
 * server/tools "Tool Result").  Resources, prompts, completion, sampling and
 * elicitation are not part of sandgate, so their scenarios stay in the
 * expected-failures baseline (t/http/conformance-expected-failures.yml).
 */
#include "config.h"

#include <time.h>

#include "core/protocol/call.h"
#include "core/base/err.h"
#include "t/conformance/fixtures.h"
#include "core/protocol/session.h"
#include "core/tools/registry.h"

/* A 1x1 red PNG and an 8-sample 8 kHz mono WAV: the smallest valid files. */
#define FIXTURE_PNG "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
#define FIXTURE_WAV "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA=="

#define NO_ARGS "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}"

/* The pause between notifications: the scenarios check that several arrive
 * during one call, about 50 ms apart. */
static void pause_50ms(void)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 50 * 1000000L };

	while (nanosleep(&ts, &ts) != 0)
		;
}

/* Wraps blocks (stolen) as the fixture result. */
static int blocks(json_t **result, json_t *content)
{
	*result = json_pack("{s:o}", "_content", content);
	return 0;
}

static json_t *text(const char *s)
{
	return json_pack("{s:s, s:s}", "type", "text", "text", s);
}

static json_t *image(void)
{
	return json_pack("{s:s, s:s, s:s}", "type", "image", "data", FIXTURE_PNG,
			 "mimeType", "image/png");
}

static json_t *resource(const char *uri, const char *mime, const char *body)
{
	return json_pack("{s:s, s:{s:s, s:s, s:s}}", "type", "resource", "resource", "uri", uri,
			 "mimeType", mime, "text", body);
}

static int fx_simple_text(struct sg_tool_ctx *t, json_t *args, json_t **result,
			  struct sg_err *err)
{
	return blocks(result, json_pack("[o]", text("This is a simple text response for testing.")));
}

static int fx_image(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	return blocks(result, json_pack("[o]", image()));
}

static int fx_audio(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	return blocks(result, json_pack("[{s:s, s:s, s:s}]", "type", "audio", "data", FIXTURE_WAV,
					"mimeType", "audio/wav"));
}

static int fx_embedded(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	return blocks(result, json_pack("[o]", resource("test://embedded-resource", "text/plain",
							"This is an embedded resource content.")));
}

static int fx_mixed(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	return blocks(result,
		      json_pack("[o, o, o]", text("Multiple content types test:"), image(),
				resource("test://mixed-content-resource", "application/json",
					 "{\"test\":\"data\",\"value\":123}")));
}

/* Three notifications/message at info, ~50 ms apart (MCP server/utilities/
 * logging); the session's level filter applies as for any tool. */
static int fx_logging(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	static const char *const steps[] = { "Tool execution started", "Tool processing data",
					     "Tool execution completed" };

	for (size_t i = 0; i < 3; i++) {
		if (i)
			pause_50ms();
		sg_session_log(t->s, t->call, SG_LOG_INFO, "conformance", steps[i]);
	}
	return blocks(result, json_pack("[o]", text("Tool with logging executed successfully")));
}

/* Progress 0, 50, 100 of 100 on the request's progressToken (MCP basic/
 * utilities/progress); without a token sg_call_progress sends nothing. */
static int fx_progress(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	for (int i = 0; i <= 2; i++) {
		if (i)
			pause_50ms();
		sg_call_progress(t->call, 50.0 * i, 100, NULL);
	}
	return blocks(result, json_pack("[o]", text("Tool with progress executed successfully")));
}

/* A tool execution error: an isError result, not a JSON-RPC error. */
static int fx_error(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	return sg_errf(err, SG_E_INTERNAL, "This tool intentionally returns an error for testing");
}

/* json-schema-2020-12 (pending suite): the schema's $schema, $defs and
 * additionalProperties come back verbatim in tools/list (SEP-1613). */
#define SCHEMA_2020_12 \
	"{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"type\":\"object\"," \
	"\"$defs\":{\"address\":{\"type\":\"object\",\"properties\":{\"street\":{\"type\":\"string\"}," \
	"\"city\":{\"type\":\"string\"}}}},\"properties\":{\"name\":{\"type\":\"string\"}," \
	"\"address\":{\"$ref\":\"#/$defs/address\"}},\"additionalProperties\":false}"

static int fx_schema(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	return blocks(result, json_pack("[o]", text("JSON Schema 2020-12 tool executed successfully")));
}

static const struct sg_tool fixture_tools[] = {
	{ "test_simple_text", "Conformance fixture: returns one text block.", NO_ARGS,
	  fx_simple_text },
	{ "test_image_content", "Conformance fixture: returns one PNG image block.", NO_ARGS,
	  fx_image },
	{ "test_audio_content", "Conformance fixture: returns one WAV audio block.", NO_ARGS,
	  fx_audio },
	{ "test_embedded_resource", "Conformance fixture: returns one embedded text resource.",
	  NO_ARGS, fx_embedded },
	{ "test_multiple_content_types",
	  "Conformance fixture: returns a text, an image and a resource block.", NO_ARGS,
	  fx_mixed },
	{ "test_tool_with_logging",
	  "Conformance fixture: sends three log notifications about 50 ms apart.", NO_ARGS,
	  fx_logging },
	{ "test_tool_with_progress",
	  "Conformance fixture: reports progress 0, 50 and 100 of 100 about 50 ms apart.",
	  NO_ARGS, fx_progress },
	{ "test_error_handling", "Conformance fixture: always fails with an isError result.",
	  NO_ARGS, fx_error },
	{ "json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", SCHEMA_2020_12,
	  fx_schema },
};

void sg_fixtures_register(void)
{
	/* sg_tools_register() keeps pointers to this static table. */
	sg_tools_register(fixture_tools, sizeof(fixture_tools) / sizeof(fixture_tools[0]));
}
