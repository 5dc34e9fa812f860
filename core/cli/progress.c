/* The command line's progress line (core/cli/progress.h). */
#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/cli/progress.h"
#include "core/protocol/session.h"

static pthread_mutex_t line_lock = PTHREAD_MUTEX_INITIALIZER;
static bool shown; /* under line_lock */

/* "\r" and "erase to the end of the line": the next line replaces this one. */
#define CLEAR_LINE "\r\033[K"

static void show(const json_t *params)
{
	double progress = json_number_value(json_object_get(params, "progress"));
	double total = json_number_value(json_object_get(params, "total"));
	const char *msg = json_string_value(json_object_get(params, "message"));
	char head[64];

	if (total > 0)
		snprintf(head, sizeof(head), "%3.0f%%", 100.0 * progress / total);
	else
		snprintf(head, sizeof(head), "%g", progress);
	pthread_mutex_lock(&line_lock);
	/* One line of a narrow terminal (at most 70 columns of message), and the
	 * cursor back at its start: a log line written meanwhile (they start
	 * with a timestamp and are longer) replaces it instead of being glued
	 * to its end. */
	fprintf(stderr, CLEAR_LINE "sandgate: [%s] %.70s\r", head, msg ? msg : "working");
	fflush(stderr);
	shown = true;
	pthread_mutex_unlock(&line_lock);
}

static void progress_send(void *ctx, struct sg_call *call, const char *data, size_t len,
			  bool final)
{
	const char *method;
	json_t *msg;

	(void)ctx, (void)call, (void)final;
	/* cheap test first: most messages are not progress */
	if (!memmem(data, len, "notifications/progress", 22))
		return;
	msg = json_loadb(data, len, 0, NULL);
	method = json_string_value(json_object_get(msg, "method"));
	if (method && !strcmp(method, "notifications/progress"))
		show(json_object_get(msg, "params"));
	json_decref(msg);
}

static const struct sg_transport_ops ops = { .name = "cli", .send = progress_send };

const struct sg_transport_ops *sg_cli_progress_ops(void)
{
	return &ops;
}

json_t *sg_cli_progress_token(void)
{
	if (!isatty(STDOUT_FILENO) || !isatty(STDERR_FILENO))
		return NULL;
	return json_string("cli");
}

void sg_cli_progress_end(void)
{
	pthread_mutex_lock(&line_lock);
	if (shown) {
		fputs(CLEAR_LINE, stderr);
		fflush(stderr);
		shown = false;
	}
	pthread_mutex_unlock(&line_lock);
}
