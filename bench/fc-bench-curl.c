/*
 * fc-bench-curl: sandgate's run_command "true" on fc.so next to its floor,
 * interleaved call by call (bench/fc-bench runs it).
 *
 *   fc-bench-curl [--body-callback] [--data-url URL] [--gap MS] BASE_URL N --
 *                 SANDGATE_COMMAND...
 *
 * It starts SANDGATE_COMMAND (`sandgate ... stdio`, env inherited) on two
 * pipes and speaks newline-delimited JSON-RPC to it as a raw-line client:
 * initialize, notifications/initialized, one run_command "true" that makes
 * the sandbox.  It reads the sandbox's access token from the emulator's
 * /_emu/state, then sends, on one reused libcurl handle, the request fc.so
 * sends for that call: the same enveloped process.Process/Start, with the
 * same headers in the same order (fc-protocol.md 5.2), read to the stream's
 * end.  After five warm-up rounds and POST /_emu/reset it runs N rounds,
 * each one tools/call through sandgate and one such request, in alternating
 * order, and prints one line per round:
 *
 *   SANDGATE_MS CURL_MS
 *
 * Both are timed here with the same clock, so the difference is sandgate's
 * own cost: the pipe round trip, JSON-RPC, the tool layer and fc.so.  Last
 * it prints "cpu USER_MS SYS_MS" (sandgate's CPU time, whole run).
 *
 * --gap MS sleeps MS milliseconds before each timed request, so that work
 * one side leaves behind (sandgate's audit insert, the emulator's process
 * teardown) is done before the other side's clock starts.
 *
 * --data-url sends the libcurl side's Start there instead of BASE_URL (the
 * data plane that sandgate was given as fc.sandbox_url).
 *
 * --body-callback hands curl the body through a read callback instead of
 * POSTFIELDS (curl 7.x then sends it in a second write after the headers);
 * for comparison only.
 *
 * Built by bench/fc-bench with `cc ... $(pkg-config --cflags --libs libcurl)`.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#define WARMUP 5

#ifndef SG_VERSION
#define SG_VERSION "0.0.0"
#endif

static int to_sg = -1, from_sg = -1;
static char line[1 << 20];
static size_t have;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void pause_ms(double ms)
{
	struct timespec ts = { (time_t)(ms / 1e3), (long)((ms - (time_t)(ms / 1e3) * 1e3) * 1e6) };

	while (ms > 0 && nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void die(const char *what)
{
	fprintf(stderr, "fc-bench-curl: %s\n", what);
	exit(1);
}

/* ---- the raw-line client -------------------------------------------------- */

static void sg_write(const char *msg)
{
	size_t n = strlen(msg), off = 0;

	while (off < n) {
		ssize_t w = write(to_sg, msg + off, n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("cannot write to sandgate");
		off += (size_t)w;
	}
}

/* The next line from sandgate, NUL-terminated in `line`. */
static const char *sg_read_line(void)
{
	static size_t next; /* start of the unread rest after the last line */
	char *nl;

	if (next) {
		memmove(line, line + next, have - next);
		have -= next;
		next = 0;
	}
	while (!(nl = memchr(line, '\n', have))) {
		ssize_t r;

		if (have >= sizeof(line) - 1)
			die("a line from sandgate is too long");
		r = read(from_sg, line + have, sizeof(line) - 1 - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("sandgate closed its output");
		have += (size_t)r;
	}
	*nl = '\0';
	next = (size_t)(nl - line) + 1;
	return line;
}

static const char *sg_call(int id)
{
	char msg[200];

	snprintf(msg, sizeof(msg),
		 "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":"
		 "{\"name\":\"run_command\",\"arguments\":{\"command\":\"true\"}}}\n", id);
	sg_write(msg);
	return sg_read_line();
}

static void sg_check(const char *reply)
{
	if (strstr(reply, "\"isError\":true") || !strstr(reply, "\"exit_code\":0")) {
		fprintf(stderr, "fc-bench-curl: a call failed: %.500s\n", reply);
		exit(1);
	}
}

static pid_t sg_start(char **argv)
{
	int in[2], out[2];
	pid_t pid;

	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	to_sg = in[1];
	from_sg = out[0];
	return pid;
}

/* ---- libcurl ------------------------------------------------------------------ */

struct body {
	const char *p;
	size_t n, off;
};

static size_t sink(char *p, size_t size, size_t nmemb, void *ud)
{
	struct body *b = ud;

	if (b && b->off + size * nmemb < b->n) {
		memcpy((char *)b->p + b->off, p, size * nmemb);
		b->off += size * nmemb;
	}
	return size * nmemb;
}

static size_t feed(char *buf, size_t size, size_t nmemb, void *ud)
{
	struct body *b = ud;
	size_t n = size * nmemb;

	if (n > b->n - b->off)
		n = b->n - b->off;
	memcpy(buf, b->p + b->off, n);
	b->off += n;
	return n;
}

static char *emu_token(const char *base, const char *sid)
{
	static char state[1 << 20];
	struct body b = { state, sizeof(state), 0 };
	char url[512], key[200], *p, *end;
	CURL *e = curl_easy_init();

	snprintf(url, sizeof(url), "%s/_emu/state", base);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
	if (curl_easy_perform(e) != CURLE_OK)
		die("GET /_emu/state failed");
	curl_easy_cleanup(e);
	state[b.off] = '\0';
	snprintf(key, sizeof(key), "\"id\":\"%s\",\"token\":\"", sid);
	p = strstr(state, key);
	if (!p)
		die("the emulator does not list the sandbox");
	p += strlen(key);
	end = strchr(p, '"');
	if (!end)
		die("a token without its end in /_emu/state");
	*end = '\0';
	return strdup(p);
}

static void emu_reset(const char *base)
{
	char url[512];
	CURL *e = curl_easy_init();

	snprintf(url, sizeof(url), "%s/_emu/reset", base);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, NULL);
	if (curl_easy_perform(e) != CURLE_OK)
		die("POST /_emu/reset failed");
	curl_easy_cleanup(e);
}

int main(int argc, char **argv)
{
	static const char json[] =
		"{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"true\"],\"envs\":{},"
		"\"cwd\":\"/home/user\"},\"stdin\":false}";
	char url[512], hdr[3][300], body[sizeof(json) + 5], sid[128], *token, *p;
	const char *base, *reply, *data_url = NULL;
	struct curl_slist *h = NULL;
	size_t n = sizeof(json) - 1;
	int count, id = 0, argi = 1, status;
	double gap_ms = 0;
	bool callback = false;
	struct rusage ru;
	pid_t pid;
	CURL *e;

	for (; argi < argc && !strncmp(argv[argi], "--", 2) && argv[argi][2]; argi++) {
		if (!strcmp(argv[argi], "--body-callback"))
			callback = true;
		else if (!strcmp(argv[argi], "--data-url") && argi + 1 < argc)
			data_url = argv[++argi];
		else if (!strcmp(argv[argi], "--gap") && argi + 1 < argc)
			gap_ms = atof(argv[++argi]);
		else
			break;
	}
	if (argc - argi < 4 || strcmp(argv[argi + 2], "--") != 0) {
		fprintf(stderr, "usage: %s [--body-callback] [--data-url URL] [--gap MS] BASE_URL N -- SANDGATE_COMMAND...\n",
			argv[0]);
		return 2;
	}
	base = argv[argi];
	count = atoi(argv[argi + 1]);
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	pid = sg_start(argv + argi + 3);

	sg_write("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
		 "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"fc-bench\",\"version\":\"1\"}}}\n");
	sg_read_line();
	sg_write("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
	reply = sg_call(++id);
	sg_check(reply);
	p = strstr(reply, "\"sandbox_id\":\"");
	if (!p || sscanf(p + 14, "%127[^\"]", sid) != 1)
		die("no sandbox_id in the first call's result");
	token = emu_token(base, sid);

	/* Byte for byte what fc.so sends (fc_setup, fc_envd_headers,
	 * fc_start_headers): curl adds Host and Accept, then Content-Length. */
	snprintf(url, sizeof(url), "%s/process.Process/Start", data_url ? data_url : base);
	snprintf(hdr[0], sizeof(hdr[0]), "X-Access-Token: %s", token);
	snprintf(hdr[1], sizeof(hdr[1]), "E2b-Sandbox-Id: %s", sid);
	snprintf(hdr[2], sizeof(hdr[2]), "E2b-Sandbox-Port: 49983");
	for (int i = 0; i < 3; i++)
		h = curl_slist_append(h, hdr[i]);
	h = curl_slist_append(h, "Expect:");
	h = curl_slist_append(h, "Content-Type: application/connect+json");
	h = curl_slist_append(h, "Connect-Protocol-Version: 1");
	h = curl_slist_append(h, "Keepalive-Ping-Interval: 50");
	h = curl_slist_append(h, "Connect-Timeout-Ms: 60000");
	body[0] = 0;
	body[1] = (char)(n >> 24);
	body[2] = (char)(n >> 16);
	body[3] = (char)(n >> 8);
	body[4] = (char)n;
	memcpy(body + 5, json, n);
	e = curl_easy_init();

	for (int i = -WARMUP; i < count; i++) {
		double t[2] = { 0, 0 };

		if (i == 0)
			emu_reset(base);
		for (int k = 0; k < 2; k++) {
			bool curl_turn = (k == 0) == (i & 1); /* alternate who goes first */
			struct body up = { body, n + 5, 0 };
			long code = 0;
			double t0;
			CURLcode rc;

			pause_ms(gap_ms);
			t0 = now_ms();
			if (!curl_turn) {
				reply = sg_call(++id);
				t[0] = now_ms() - t0;
				sg_check(reply);
				continue;
			}
			curl_easy_setopt(e, CURLOPT_URL, url);
			curl_easy_setopt(e, CURLOPT_USERAGENT, "sandgate/" SG_VERSION);
			curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
			if (callback) {
				curl_easy_setopt(e, CURLOPT_POST, 1L);
				curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(n + 5));
				curl_easy_setopt(e, CURLOPT_READFUNCTION, feed);
				curl_easy_setopt(e, CURLOPT_READDATA, &up);
			} else {
				curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
				curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(n + 5));
			}
			curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
			curl_easy_setopt(e, CURLOPT_WRITEDATA, NULL);
			rc = curl_easy_perform(e);
			t[1] = now_ms() - t0;
			curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
			if (rc != CURLE_OK || code != 200) {
				fprintf(stderr, "fc-bench-curl: request %d failed: %s, HTTP %ld\n", i,
					curl_easy_strerror(rc), code);
				return 1;
			}
		}
		if (i >= 0)
			printf("%.3f %.3f\n", t[0], t[1]);
	}
	{
		long port = 0;

		/* The emulator logs each request's client port: this tells
		 * libcurl's requests from sandgate's. */
		curl_easy_getinfo(e, CURLINFO_LOCAL_PORT, &port);
		printf("port %ld\n", port);
	}
	close(to_sg);
	if (waitpid(pid, &status, 0) < 0)
		die("waitpid");
	getrusage(RUSAGE_CHILDREN, &ru);
	printf("cpu %.1f %.1f\n", ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec / 1e3,
	       ru.ru_stime.tv_sec * 1e3 + ru.ru_stime.tv_usec / 1e3);
	curl_easy_cleanup(e);
	curl_slist_free_all(h);
	curl_global_cleanup();
	free(token);
	return 0;
}
