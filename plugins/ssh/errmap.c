/*
 * The one place libssh2 results become sandgate errors: the code from the
 * result (and for SFTP from the server's status), the text from
 * libssh2_session_last_error(), and what failed on which target.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/ssh.h"

#include <stdio.h>
#include <string.h>

bool ssh_rc_is_transport(int rc)
{
	switch (rc) {
	case LIBSSH2_ERROR_SOCKET_NONE:
	case LIBSSH2_ERROR_BANNER_RECV:
	case LIBSSH2_ERROR_BANNER_SEND:
	case LIBSSH2_ERROR_INVALID_MAC:
	case LIBSSH2_ERROR_KEX_FAILURE:
	case LIBSSH2_ERROR_SOCKET_SEND:
	case LIBSSH2_ERROR_KEY_EXCHANGE_FAILURE:
	case LIBSSH2_ERROR_TIMEOUT:
	case LIBSSH2_ERROR_DECRYPT:
	case LIBSSH2_ERROR_SOCKET_DISCONNECT:
	case LIBSSH2_ERROR_PROTO:
	case LIBSSH2_ERROR_SOCKET_TIMEOUT:
	case LIBSSH2_ERROR_SOCKET_RECV:
	case LIBSSH2_ERROR_ENCRYPT:
	case LIBSSH2_ERROR_BAD_SOCKET:
	case LIBSSH2_ERROR_OUT_OF_BOUNDARY:
	case LIBSSH2_ERROR_BAD_USE: /* our own bug: the session's state is unknown */
		return true;
	default:
		return false;
	}
}

/* What a transport result means, for people: libssh2's own texts for these
 * are terse ("transport read"). */
static const char *ssh_rc_meaning(int rc)
{
	switch (rc) {
	case LIBSSH2_ERROR_SOCKET_RECV:
		return "the connection was reset or closed by the server";
	case LIBSSH2_ERROR_SOCKET_DISCONNECT:
		return "the server closed the connection";
	case LIBSSH2_ERROR_SOCKET_SEND:
		return "the connection is broken (send failed)";
	case LIBSSH2_ERROR_BANNER_RECV:
	case LIBSSH2_ERROR_BANNER_SEND:
		return "no SSH banner (is it an SSH server?)";
	case LIBSSH2_ERROR_KEX_FAILURE:
	case LIBSSH2_ERROR_KEY_EXCHANGE_FAILURE:
		return "no common key exchange or host key algorithm";
	case LIBSSH2_ERROR_TIMEOUT:
	case LIBSSH2_ERROR_SOCKET_TIMEOUT:
		return "timed out";
	case LIBSSH2_ERROR_BAD_USE:
		return "internal error: libssh2 misused";
	default:
		return NULL;
	}
}

unsigned long ssh_sftp_status(LIBSSH2_SFTP *sftp, int rc)
{
	return sftp && rc == LIBSSH2_ERROR_SFTP_PROTOCOL ? libssh2_sftp_last_error(sftp) : 0;
}

/* SFTP status codes (draft-ietf-secsh-filexfer) as sandgate errors. */
static int ssh_sftp_code(unsigned long st, const char **name)
{
	switch (st) {
	case LIBSSH2_FX_EOF:
		*name = "unexpected end of file";
		return SG_E_IO;
	case LIBSSH2_FX_NO_SUCH_FILE:
	case LIBSSH2_FX_NO_SUCH_PATH:
		*name = "no such file or directory";
		return SG_E_NOTFOUND;
	case LIBSSH2_FX_PERMISSION_DENIED:
	case LIBSSH2_FX_WRITE_PROTECT:
		*name = "permission denied";
		return SG_E_PERM;
	case LIBSSH2_FX_FILE_ALREADY_EXISTS:
		*name = "file exists";
		return SG_E_EXISTS;
	case LIBSSH2_FX_NO_SPACE_ON_FILESYSTEM:
	case LIBSSH2_FX_QUOTA_EXCEEDED:
		*name = "no space left (or quota exceeded)";
		return SG_E_IO;
	case LIBSSH2_FX_OP_UNSUPPORTED:
		*name = "operation not supported by the SFTP server";
		return SG_E_NOTSUP;
	case LIBSSH2_FX_NOT_A_DIRECTORY:
		*name = "not a directory";
		return SG_E_INVAL;
	case LIBSSH2_FX_INVALID_FILENAME:
		*name = "invalid file name";
		return SG_E_INVAL;
	case LIBSSH2_FX_DIR_NOT_EMPTY:
		*name = "directory not empty";
		return SG_E_EXISTS;
	case LIBSSH2_FX_LINK_LOOP:
		*name = "too many symbolic links";
		return SG_E_INVAL;
	case LIBSSH2_FX_BAD_MESSAGE:
		*name = "bad message (invalid argument)";
		return SG_E_INVAL;
	case LIBSSH2_FX_NO_CONNECTION:
	case LIBSSH2_FX_CONNECTION_LOST:
		*name = "SFTP connection lost";
		return SG_E_UNAVAILABLE;
	default:
		*name = "failure";
		return SG_E_IO;
	}
}

static int ssh_code_of(int rc)
{
	if (ssh_rc_is_transport(rc))
		return rc == LIBSSH2_ERROR_PROTO || rc == LIBSSH2_ERROR_INVALID_MAC ||
		       rc == LIBSSH2_ERROR_DECRYPT || rc == LIBSSH2_ERROR_OUT_OF_BOUNDARY ?
		       SG_E_PROTO : SG_E_UNAVAILABLE;
	switch (rc) {
	case LIBSSH2_ERROR_ALLOC:
		return SG_E_NOMEM;
	case LIBSSH2_ERROR_AUTHENTICATION_FAILED:
	case LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED:
	case LIBSSH2_ERROR_KEYFILE_AUTH_FAILED:
	case LIBSSH2_ERROR_PASSWORD_EXPIRED:
		return SG_E_PERM;
	case LIBSSH2_ERROR_FILE:
		return SG_E_IO;
	case LIBSSH2_ERROR_METHOD_NONE:
	case LIBSSH2_ERROR_METHOD_NOT_SUPPORTED:
		return SG_E_NOTSUP;
	case LIBSSH2_ERROR_CHANNEL_FAILURE:
	case LIBSSH2_ERROR_CHANNEL_REQUEST_DENIED:
	case LIBSSH2_ERROR_REQUEST_DENIED:
		return SG_E_BACKEND;
	case LIBSSH2_ERROR_CHANNEL_CLOSED:
	case LIBSSH2_ERROR_CHANNEL_EOF_SENT:
	case LIBSSH2_ERROR_CHANNEL_UNKNOWN:
	case LIBSSH2_ERROR_CHANNEL_OUTOFORDER:
	case LIBSSH2_ERROR_CHANNEL_WINDOW_EXCEEDED:
	case LIBSSH2_ERROR_CHANNEL_PACKET_EXCEEDED:
		return SG_E_IO;
	case LIBSSH2_ERROR_INVAL:
	case LIBSSH2_ERROR_BUFFER_TOO_SMALL:
		return SG_E_INVAL;
	case LIBSSH2_ERROR_SFTP_PROTOCOL:
		return SG_E_IO;
	default:
		return SG_E_BACKEND;
	}
}

int ssh_fail(struct ssh_op *op, LIBSSH2_SFTP *sftp, int rc, const char *what,
	     struct sg_err *err)
{
	struct ssh_conn *c = op->c;
	const struct ssh_target *t = &c->pool->target;
	const struct sg_host_api *host = c->pool->ctx->host;
	char *text = NULL;
	int len = 0, code = ssh_code_of(rc);
	unsigned long st = ssh_sftp_status(sftp, rc);
	const char *stname = NULL;

	if (c->session)
		libssh2_session_last_error(c->session, &text, &len, 0);
	/* EAGAIN that ended in ssh_op_wait(): why the op stopped waiting. */
	if (rc == LIBSSH2_ERROR_EAGAIN) {
		code = op->stop == SSH_STOP_CANCEL ? SG_E_CANCELLED :
		       op->stop == SSH_STOP_TIMEOUT ? SG_E_TIMEOUT : SG_E_UNAVAILABLE;
		return host->errf(err, code, "ssh: %s on %s:%u: %s%s", what, t->host, t->port,
				  op->stop == SSH_STOP_CANCEL ? "cancelled" :
				  op->stop == SSH_STOP_TIMEOUT ? "timed out" : "the connection dropped: ",
				  op->stop == SSH_STOP_BROKEN || !op->stop ? c->broken_why : "");
	}
	if (ssh_rc_is_transport(rc)) {
		const char *meaning = ssh_rc_meaning(rc);
		char why[200];

		snprintf(why, sizeof(why), "%.*s%s%s (libssh2 error %d)", len > 100 ? 100 : len,
			 text ? text : "", meaning ? ": " : "", meaning ? meaning : "", rc);
		ssh_conn_break(c, why);
		return host->errf(err, code, "ssh: %s on %s@%s:%u failed: %s", what, t->user, t->host,
				  t->port, why);
	}
	if (st) {
		code = ssh_sftp_code(st, &stname);
		return host->errf(err, code, "ssh: %s: %s (SFTP status %lu) on %s:%u", what, stname, st,
				  t->host, t->port);
	}
	return host->errf(err, code, "ssh: %s on %s@%s:%u failed: %.*s (libssh2 error %d)", what,
			  t->user, t->host, t->port, len > 300 ? 300 : len, text ? text : "", rc);
}
