/*
 * A runner that is slow to start is not one that cannot run.  The client
 * (plugins/runner/client.c, rn_conn_open) answers -2 for a peer that stays
 * silent past the HELLO timeout on a connection that is still up, and -1
 * for one that hangs up.  A site (plugins/runner/rsite.c) whose start op
 * says SG_E_TIMEOUT runs that call the plain way and tries the runner again
 * on the next call; SG_E_NOTSUP makes the plain way the site's for good;
 * with no plain way a timeout is the call's own error, every time.  And a
 * runner overdue with a command's end (frozen here) is replaced by the next
 * use of its site (the built runner, $SG_RUNNER or
 * $SG_TEST_BUILDDIR/sandgate-runner, on a socketpair).
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugins/runner/rclient.h"
#include "t/lib/fakehost.h"
#include "t/lib/runner_fork.h"

static const struct sg_host_api host = TL_RUNNER_HOST;

/* rn_conn_open on a socketpair whose other end says nothing, or hangs up. */
static int open_against(bool hang_up, char *why, size_t size)
{
	struct rn_conn_opts o = { .name = "silent peer", .build_id = "test",
				  .hello_timeout_ms = 300 };
	struct rn_transport t;
	struct rn_conn *c = NULL;
	int sv[2], rc;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(why, size, "socketpair: %s", strerror(errno));
		return 99;
	}
	if (hang_up)
		close(sv[1]);
	rn_fd_transport(sv[0], &t);
	rc = rn_conn_open(&t, &o, &c, why, size); /* owns sv[0] */
	if (!hang_up)
		close(sv[1]);
	if (c)
		rn_conn_close(c);
	return rc;
}

static void test_open(void)
{
	char why[256];
	int rc;

	rc = open_against(false, why, sizeof(why));
	fakehost_ok(rc == -2, "a peer silent past the HELLO timeout: -2, try again (got %d: %s)", rc, why);
	fakehost_ok(strstr(why, "no HELLO from the runner within 300 ms") != NULL, "... and why says so (%s)",
		    why);
	rc = open_against(true, why, sizeof(why));
	fakehost_ok(rc == -1, "a peer that hangs up: -1 (got %d: %s)", rc, why);
}

/* A start op that answers with the code of the current case. */
static int start_code;
static int starts;

static int t_start(void *ud, const char *arg, struct rn_conn **out, char *path, size_t size,
		   struct sg_err *err)
{
	(void)ud;
	(void)arg;
	(void)path;
	(void)size;
	*out = NULL;
	starts++;
	return host.errf(err, start_code, "start case %d", start_code);
}

static void t_kill_group(void *ud, long pgid)
{
	(void)ud;
	(void)pgid;
}

static const char *state_of(struct rnc_site *s)
{
	static char state[32];
	json_t *st = rnc_site_status(s);

	snprintf(state, sizeof(state), "%s", json_string_value(json_object_get(st, "runner")));
	json_decref(st);
	return state;
}

static void test_site(void)
{
	struct rnc_ops with_plain = { .tag = "test", .plain = "the plain way", .start = t_start,
				      .kill_group = t_kill_group };
	struct rnc_ops no_plain = { .tag = "test", .start = t_start, .kill_group = t_kill_group };
	struct rnc_site s;
	struct rn_conn *c;
	struct sg_err e = { 0 };
	int rc;

	rnc_site_init(&s, &host, &with_plain, NULL, "in the test", true, false);
	start_code = SG_E_TIMEOUT;
	starts = 0;
	rc = rnc_site_get(&s, &c, &e);
	fakehost_ok(rc == 1 && !c, "a start too slow: this call goes the plain way (rc %d)", rc);
	fakehost_ok(strcmp(state_of(&s), "not started") == 0, "... and the site is not given up (%s)",
		    state_of(&s));
	rc = rnc_site_get(&s, &c, &e);
	fakehost_ok(rc == 1 && starts == 2, "... the next call tries the runner again (%d starts)", starts);
	rc = rnc_site_get(&s, &c, &e);
	fakehost_ok(rc == 1 && strcmp(state_of(&s), "fallback") == 0,
		    "too slow %d times in a row: the plain way for good (%s)", RNC_SLOW_STARTS,
		    state_of(&s));
	rc = rnc_site_get(&s, &c, &e);
	fakehost_ok(rc == 1 && starts == 3, "... and no start is tried again (%d starts)", starts);
	rnc_site_fini(&s);

	rnc_site_init(&s, &host, &with_plain, NULL, "in the test", true, false);
	starts = 0;
	start_code = SG_E_NOTSUP;
	rc = rnc_site_get(&s, &c, &e);
	fakehost_ok(rc == 1 && strcmp(state_of(&s), "fallback") == 0,
		    "a runner that cannot run here: the plain way for good (%s)", state_of(&s));
	rc = rnc_site_get(&s, &c, &e);
	fakehost_ok(rc == 1 && starts == 1, "... and no start is tried again (%d starts)", starts);
	rnc_site_fini(&s);

	/* in a row: another failure in between starts the count again */
	rnc_site_init(&s, &host, &with_plain, NULL, "in the test", true, false);
	{
		const int codes[] = { SG_E_TIMEOUT, SG_E_TIMEOUT, SG_E_IO, SG_E_TIMEOUT, SG_E_TIMEOUT };

		for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
			start_code = codes[i];
			rnc_site_get(&s, &c, &e);
		}
	}
	fakehost_ok(strcmp(state_of(&s), "not started") == 0,
		    "two slow starts, a failure, two slow starts: not given up (%s)", state_of(&s));
	start_code = SG_E_TIMEOUT;
	rnc_site_get(&s, &c, &e);
	fakehost_ok(strcmp(state_of(&s), "fallback") == 0, "... the third in a row gives up (%s)",
		    state_of(&s));
	rnc_site_fini(&s);

	rnc_site_init(&s, &host, &no_plain, NULL, "in the test", true, false);
	starts = 0;
	start_code = SG_E_TIMEOUT;
	rc = rnc_site_get(&s, &c, &e);
	fakehost_ok(rc == -1 && e.code == SG_E_TIMEOUT,
		    "no plain way: a slow start is the call's error (rc %d, code %d)", rc, e.code);
	rc = rnc_site_get(&s, &c, &e);
	fakehost_ok(rc == -1 && starts == 2, "... and the next call tries again (%d starts)", starts);
	rnc_site_fini(&s);
}

/* A command still running, watched as overdue from now on. */
static struct rn_req *overdue_now(struct rnc_site *s, struct rn_conn *c)
{
	struct rn_spawn sp = { .command = "sleep 30", .grace_ms = 100 };
	struct rn_req *q = NULL;
	char why[256];

	if (rn_spawn(c, &sp, &q, why, sizeof(why)) != 0)
		return NULL;
	rnc_site_overdue(s, c, q, 0);
	return q;
}

static void test_overdue(void)
{
	struct rnc_ops ops = { .tag = "test", .start = tl_runner_start,
			       .kill_group = tl_runner_kill_group };
	struct rnc_site s;
	struct rn_conn *c1 = NULL, *c2 = NULL;
	struct rn_req *q;
	struct sg_err e = { 0 };
	pid_t first;

	rnc_site_init(&s, &host, &ops, NULL, "in the test", true, false);
	if (rnc_site_get(&s, &c1, &e) != 0) {
		fakehost_ok(0, "the runner starts (%s)", e.msg);
		return;
	}
	first = tl_runner_pid;
	kill(first, SIGSTOP);
	q = overdue_now(&s, c1);
	fakehost_ok(q != NULL, "a command is sent to the runner");
	rn_conn_put(c1);
	fakehost_ok(rnc_site_get(&s, &c2, &e) == 0 && c2 != c1 && tl_runner_pid != first,
		    "overdue with its end (the runner frozen): the next use gets a new runner");
	fakehost_ok(rn_req_state(q, NULL, NULL, 0, NULL) == RN_REQ_FAILED,
		    "... and the overdue command failed with the old one");
	rn_conn_put(c2);
	rn_req_put(q);
	kill(first, SIGKILL);
	waitpid(first, NULL, 0);
	rnc_site_fini(&s);
	waitpid(tl_runner_pid, NULL, 0);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_open();
	test_site();
	test_overdue();
	return fakehost_done();
}
