/*
 * fc-bench-curl: the floor under fc.so's run_command.  Sends the same
 * request fc.so sends for run_command "true" (an enveloped
 * process.Process/Start with the same headers, fc-protocol.md 5.2) N times
 * on one reused libcurl handle, reads each stream to its end, and prints
 * one line per request: the milliseconds it took.
 *
 *   fc-bench-curl BASE_URL SANDBOX_ID ACCESS_TOKEN N
 *
 * Built by bench/fc-bench with `cc ... $(pkg-config --cflags --libs libcurl)`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

static size_t sink(char *p, size_t size, size_t nmemb, void *ud)
{
	size_t *total = ud;

	(void)p;
	*total += size * nmemb;
	return size * nmemb;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	static const char json[] =
		"{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"true\"],\"envs\":{},"
		"\"cwd\":\"/home/user\"},\"stdin\":false}";
	char url[512], hdr[3][300], body[sizeof(json) + 5];
	struct curl_slist *h = NULL;
	size_t n = sizeof(json) - 1;
	CURL *e;
	int count;

	if (argc != 5) {
		fprintf(stderr, "usage: %s BASE_URL SANDBOX_ID ACCESS_TOKEN N\n", argv[0]);
		return 2;
	}
	count = atoi(argv[4]);
	snprintf(url, sizeof(url), "%s/process.Process/Start", argv[1]);
	snprintf(hdr[0], sizeof(hdr[0]), "X-Access-Token: %s", argv[3]);
	snprintf(hdr[1], sizeof(hdr[1]), "E2b-Sandbox-Id: %s", argv[2]);
	snprintf(hdr[2], sizeof(hdr[2]), "E2b-Sandbox-Port: 49983");
	for (int i = 0; i < 3; i++)
		h = curl_slist_append(h, hdr[i]);
	h = curl_slist_append(h, "Content-Type: application/connect+json");
	h = curl_slist_append(h, "Connect-Protocol-Version: 1");
	h = curl_slist_append(h, "Keepalive-Ping-Interval: 50");
	h = curl_slist_append(h, "Connect-Timeout-Ms: 60000");
	h = curl_slist_append(h, "Expect:");
	body[0] = 0;
	body[1] = (char)(n >> 24);
	body[2] = (char)(n >> 16);
	body[3] = (char)(n >> 8);
	body[4] = (char)n;
	memcpy(body + 5, json, n);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	e = curl_easy_init();
	for (int i = 0; i < count; i++) {
		size_t total = 0;
		long status = 0;
		double t0 = now_ms();
		CURLcode rc;

		curl_easy_setopt(e, CURLOPT_URL, url);
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)(n + 5));
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, &total);
		rc = curl_easy_perform(e);
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
		if (rc != CURLE_OK || status != 200) {
			fprintf(stderr, "request %d failed: %s, HTTP %ld\n", i, curl_easy_strerror(rc), status);
			return 1;
		}
		printf("%.3f\n", now_ms() - t0);
	}
	curl_easy_cleanup(e);
	curl_slist_free_all(h);
	curl_global_cleanup();
	return 0;
}
