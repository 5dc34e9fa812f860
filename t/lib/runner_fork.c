/* The built runner for compiled tests: see runner_fork.h. */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "t/lib/runner_fork.h"

pid_t tl_runner_pid;

const char *tl_config_none(const char *section, const char *key)
{
	(void)section;
	(void)key;
	return NULL;
}

const char *tl_state_tmp(void)
{
	return "/tmp";
}

const char *tl_runner_path(void)
{
	static char path[4096];
	const char *p = getenv("SG_RUNNER"), *bd = getenv("SG_TEST_BUILDDIR");

	if (!path[0]) {
		if (p && *p)
			snprintf(path, sizeof(path), "%s", p);
		else
			snprintf(path, sizeof(path), "%s/sandgate-runner", bd && *bd ? bd : ".");
	}
	return path;
}

int tl_runner_start(void *ud, const char *arg, struct rn_conn **out, char *path, size_t size,
		    struct sg_err *err)
{
	struct rn_conn_opts o = { .name = "test", .hello_timeout_ms = 5000 };
	char id[RN_BUILD_ID_LEN + 1], why[256] = "";
	const char *runner = tl_runner_path();
	struct rn_transport t;
	int sv[2];

	(void)ud;
	if (rn_build_id_file(runner, id) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
	{
		err->code = SG_E_IO;
		err->sys_errno = errno;
		snprintf(err->msg, sizeof(err->msg), "cannot start %s: %s", runner, strerror(errno));
		return -1;
	}
	o.build_id = id;
	tl_runner_pid = fork();
	if (tl_runner_pid < 0) {
		err->code = SG_E_IO;
		err->sys_errno = errno;
		snprintf(err->msg, sizeof(err->msg), "fork: %s", strerror(errno));
		tl_runner_pid = 0; /* no runner: a test signals one only after a start */
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (tl_runner_pid == 0) {
		dup2(sv[1], 0);
		dup2(sv[1], 1);
		execl(runner, "sandgate-runner", arg, (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	rn_fd_transport(sv[0], &t);
	if (rn_conn_open(&t, &o, out, why, sizeof(why)) < 0) {
		err->code = SG_E_IO;
		snprintf(err->msg, sizeof(err->msg), "%s", why);
		return -1;
	}
	snprintf(path, size, "%s", runner);
	return 0;
}

void tl_runner_kill_group(void *ud, long pgid)
{
	(void)ud;
	kill(-(pid_t)pgid, SIGKILL);
}
