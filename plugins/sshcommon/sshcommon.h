/*
 * What every SSH client in sandgate checks before it uses a server: the
 * server's host key against an OpenSSH known_hosts file (knownhosts.c) and
 * the sign-in with ssh-agent or identity files (userauth.c).  ssh.so and
 * docker.so (ssh:// engines) each compile these sources in: a plugin cannot
 * link another plugin.  Nothing here holds global state but one mutex that
 * serialises appends to known_hosts files within the plugin (flock() covers
 * other processes and the other plugin).
 *
 * The caller owns the session and drives it as it likes: blocking (docker's
 * connection thread) or non-blocking with its own wait (ssh.so's ops),
 * through struct sshc_io.  Messages start with the peer's plugin name and
 * name the configuration keys the caller gives in struct sshc_peer.
 */
#ifndef SG_SSHCOMMON_H
#define SG_SSHCOMMON_H

#include <stdbool.h>
#include <stddef.h>

#include <libssh2.h>

#include <sandgate/plugin.h>

/* How a host key that known_hosts does not hold is treated. */
enum sshc_policy {
	SSHC_STRICT = 0,   /* refused, with the fingerprint and how to trust it */
	SSHC_ACCEPT_NEW,   /* appended to known_hosts; a changed key is still refused */
	SSHC_OFF           /* nothing is checked (the caller warns once) */
};

/* The server and the user, all strings borrowed for the call. */
struct sshc_peer {
	const char *host;
	unsigned port;
	const char *user;
	const char *key;            /* identity file, "" or NULL: ~/.ssh/id_ed25519,
				       id_ecdsa, id_rsa after the agent */
	const char *known_hosts;    /* path, "~" already expanded */
	enum sshc_policy policy;
	const char *passphrase;     /* of encrypted keys, or NULL; never logged */
	const char *plugin;         /* "ssh", "docker": log module, message prefix */
	const char *label;          /* what it is, for the off warning: "target 'x'" */
	/* Where the operator sets each thing, for messages: */
	const char *policy_key;     /* "[ssh] host_key_policy" */
	const char *known_key;      /* "[ssh] known_hosts" */
	const char *passphrase_key; /* "[ssh] passphrase or SANDGATE_SSH_PASSPHRASE" */
	const char *identity_key;   /* "[ssh] default_key or the target's key" */
};

/* How the caller drives libssh2 on session s. */
struct sshc_io {
	const struct sg_host_api *host;   /* borrowed */
	LIBSSH2_SESSION *s;               /* borrowed */
	/* After LIBSSH2_ERROR_EAGAIN: returns 0 to try the same call again,
	 * -1 to give up (the call's EAGAIN then goes to fatal).  NULL for a
	 * blocking session. */
	int (*again)(void *ud);
	/* Fills err for a libssh2 result that ends the sign-in (the connection
	 * is gone, a timeout) while doing `what`.  Returns -1. */
	int (*fatal)(void *ud, int rc, const char *what, struct sg_err *err);
	/* True when rc means the connection itself is gone. */
	bool (*is_transport)(int rc);
	void *ud;
};

/* Repeats a libssh2 call while it says EAGAIN and io->again allows. */
#define SSHC_CALL(io, rc, expr) \
	do { (rc) = (expr); } while ((rc) == LIBSSH2_ERROR_EAGAIN && (io)->again && \
				    (io)->again((io)->ud) == 0)

/* ---- knownhosts.c ------------------------------------------------------------------- */

struct sshc_known;

/* Loads p->known_hosts for session s (a missing file is empty; an unreadable
 * one is an error unless the policy is off).  Returns a new set (free with
 * sshc_known_free) or NULL with err (SG_E_NOMEM, SG_E_IO). */
struct sshc_known *sshc_known_load(const struct sg_host_api *host, LIBSSH2_SESSION *s,
				   const struct sshc_peer *p, struct sg_err *err);
void sshc_known_free(struct sshc_known *k);

/* Sets s's host-key algorithm preference before the handshake: the types
 * known_hosts holds for the peer first, so a host known by one key type is
 * not refused as unknown because it offered another. */
void sshc_known_prefer(struct sshc_known *k, LIBSSH2_SESSION *s, const struct sshc_peer *p);

/* Checks s's host key after the handshake per p->policy.  *off_warned (may
 * be NULL) tells whether the off policy was logged already; it is set when
 * this call logs it.  Returns 0, or -1 with err: SG_E_PERM for a key that is
 * not known (its fingerprint and how to trust it), changed (the line that
 * holds the old one) or @revoked; SG_E_IO when accept-new cannot record it;
 * SG_E_PROTO for a key type libssh2 does not know. */
int sshc_known_verify(struct sshc_known *k, LIBSSH2_SESSION *s, const struct sshc_peer *p,
		      bool *off_warned, struct sg_err *err);

/* "SHA256:<base64>" of s's host key into out[n]. */
void sshc_fingerprint(LIBSSH2_SESSION *s, char *out, size_t n);

/* ---- userauth.c --------------------------------------------------------------------- */

/* Signs in as p->user on io->s after the host key was checked: ssh-agent
 * when SSH_AUTH_SOCK is set, then p->key (or the usual identity files).
 * Returns 0, or -1 with err: SG_E_PERM listing every method tried and why
 * each failed (no key material, no passphrase in it), or what io->fatal
 * said. */
int sshc_userauth(const struct sshc_io *io, const struct sshc_peer *p, struct sg_err *err);

/* Expands a leading "~/" (or "~") with $HOME, else the passwd entry, into
 * out[n].  Returns 0, or -1 when it does not fit or HOME is unknown. */
int sshc_expand_home(const char *in, char *out, size_t n);

#endif /* SG_SSHCOMMON_H */
