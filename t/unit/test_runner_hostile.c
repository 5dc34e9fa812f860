/*
 * The runner client facing a runner that lies (t/lib/hostile-runner.py):
 * what a command could be once it spoke in the runner's place, or a runner
 * binary a sandbox replaced.  A listing it answers with "more" forever
 * ends at RN_LIST_MAX entries with a protocol error, in bounded memory and
 * time (it grew sandgate by gigabytes, and the call never answered).
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plugins/runner/rclient.h"
#include "t/lib/fakehost.h"
#include "t/lib/runner_fork.h"

static const struct sg_host_api host = TL_RUNNER_HOST;

static const struct rnc_ops ops = { .tag = "test", .start = tl_runner_start,
				    .kill_group = tl_runner_kill_group };

static long rss_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static void test_list_forever(struct rnc_site *s)
{
	struct sg_err err = { 0 };
	json_t *entries = NULL;
	time_t t0 = time(NULL);
	long before = rss_kb();
	int rc = rnc_file_list(s, NULL, "/anything", NULL, &entries, &err);

	fakehost_ok(rc < 0 && err.code == SG_E_PROTO &&
		    strstr(err.msg, "the runner sent more than 100000 entries") && !entries,
		    "a listing answered with \"more\" forever fails at 100000 entries: %s", err.msg);
	/* 110 MB here, 350 under ThreadSanitizer; without the bound it went
	 * past gigabytes within seconds, and on for good */
	fakehost_ok(time(NULL) - t0 < 60 && rss_kb() - before < 1024 * 1024,
		    "... in %ld s, %ld kB more", (long)(time(NULL) - t0), rss_kb() - before);
}

int main(void)
{
	const char *src = getenv("SG_TEST_SRCDIR");
	char path[4096];
	struct rnc_site s;

	signal(SIGPIPE, SIG_IGN);
	snprintf(path, sizeof(path), "%s/t/lib/hostile-runner.py", src && *src ? src : ".");
	setenv("SG_RUNNER", path, 1);
	rnc_site_init(&s, &host, &ops, NULL, "in the test", true, false);
	test_list_forever(&s);
	rnc_site_fini(&s);
	if (tl_runner_pid > 0)
		waitpid(tl_runner_pid, NULL, 0);
	return fakehost_done();
}
