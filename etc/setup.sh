#!/bin/bash
# etc/setup.sh - make this Debian 12 machine ready to build and test sandgate:
# both Quick start commands (etc/quickstart.sh, t/run-all.sh) and CI start
# here.  Re-running it is fast: it installs only what is missing, reuses a
# running Docker engine, the image and the node_modules folders.
#
# 1. Debian packages (only the missing ones)
# 2. the user local sandboxes run as (`sandgate`, a system user)
# 3. the Docker engine (started by hand when `docker info` fails: no systemd)
# 4. the default sandbox image sandgate/base:1 (etc/image/build.sh; reused
#    when its recipe is unchanged)
# 5. the Node test dependencies (exact pins in t/package.json, t/*/package.json)
#
# SG_SETUP_MAIN=1 does only what the main job needs (the build's packages,
# bubblewrap and python3 for local sandboxes, the user): no Docker, no test
# tools.  SG_SETUP_NO_NODE=1 skips step 5.
set -euo pipefail

cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=l
started=$SECONDS

step() { printf '\n#### setup: %s (%d s)\n' "$*" $((SECONDS - started)); }
die() {
	printf 'etc/setup.sh: %s\n' "$*" >&2
	echo "0 passed, 1 failed"
	exit 1
}

# ---- 1. packages ----------------------------------------------------------------
step "Debian packages"
# the build, and what local sandboxes need (bubblewrap, the interpreters)
packages=(build-essential autoconf automake libtool autoconf-archive pkg-config
	libcurl4-openssl-dev libssh2-1-dev libjansson-dev libinih-dev libmicrohttpd-dev
	libsqlite3-dev libarchive-dev libcmocka-dev libyaml-dev libssl-dev bubblewrap
	procps ca-certificates python3)
# the tests: Docker, sshd, the tools they drive
if [ "${SG_SETUP_MAIN:-}" != 1 ]; then
	packages+=(docker.io debootstrap openssh-server sqlite3 valgrind nodejs npm curl
		python3-matplotlib python3-numpy groff-base clang libclang-rt-14-dev)
fi
missing=()
for p in "${packages[@]}"; do
	case $p in
	# a Node.js from elsewhere (e.g. NodeSource, which bundles npm) is fine:
	# Debian's npm package would conflict with it
	nodejs) command -v node >/dev/null && continue ;;
	npm) command -v npm >/dev/null && continue ;;
	# an engine from Docker's own packages is fine too
	docker.io) command -v dockerd >/dev/null && command -v docker >/dev/null && continue ;;
	esac
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "installing: ${missing[*]}"
	apt-get update -q || die "apt-get update failed"
	# no init system here: keep the packages' postinst scripts from starting
	# services (dockerd is started below, sshd is not wanted)
	policy=
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		policy=/usr/sbin/policy-rc.d
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod 755 "$policy"
	fi
	rc=0
	apt-get install -y -q "${missing[@]}" </dev/null || rc=$?
	[ -n "$policy" ] && rm -f "$policy"
	[ "$rc" -eq 0 ] || die "apt-get install ${missing[*]} failed"
else
	echo "all ${#packages[@]} packages are installed"
fi
if [ "${SG_SETUP_MAIN:-}" != 1 ]; then
	node --version >/dev/null 2>&1 || die "node does not run after the install"
	npm --version >/dev/null 2>&1 || die "npm does not run after the install"
fi

# ---- 2. the user of local sandboxes ----------------------------------------------------
# As root, local.so runs each jail as this unprivileged user ([local] user),
# so that per-user and cgroup limits hold; without it, it uses nobody.
step "user sandgate"
if ! getent passwd sandgate >/dev/null; then
	useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
		--user-group sandgate || die "useradd sandgate failed"
	echo "made the system user sandgate"
else
	echo "the user sandgate exists"
fi
[ "${SG_SETUP_MAIN:-}" = 1 ] && exit 0

# ---- 3. Docker engine -------------------------------------------------------------
step "Docker engine"
if ! docker info >/dev/null 2>&1; then
	echo "docker info fails: starting dockerd (log in /var/log/dockerd.log)"
	# a dockerd killed with the previous session leaves its pid file behind,
	# and a new dockerd refuses to start while it is there
	for pidfile in /var/run/docker.pid /var/run/docker/containerd/containerd.pid; do
		if [ -f "$pidfile" ] && ! kill -0 "$(cat "$pidfile" 2>/dev/null)" 2>/dev/null; then
			echo "removing the stale $pidfile"
			rm -f "$pidfile"
		fi
	done
	nohup dockerd >/var/log/dockerd.log 2>&1 </dev/null &
	dockerd_pid=$!
	ok=0
	for _ in $(seq 1 60); do
		if docker info >/dev/null 2>&1; then ok=1; break; fi
		kill -0 "$dockerd_pid" 2>/dev/null || break # it died: no use waiting
		sleep 1
	done
	if [ "$ok" != 1 ]; then
		tail -n 30 /var/log/dockerd.log >&2 || true
		die "the Docker engine did not come up within 60 s (see /var/log/dockerd.log above)"
	fi
fi
docker version --format 'docker engine {{.Server.Version}}, client {{.Client.Version}}'

# ---- 4. test image ------------------------------------------------------------------
step "image sandgate/base:1"
sh etc/image/build.sh || die "etc/image/build.sh failed: the test image sandgate/base:1 could not be built"

[ "${SG_SETUP_NO_NODE:-}" = 1 ] && exit 0

# ---- 5. Node test dependencies --------------------------------------------------------
# t/package.json (the MCP SDK) and every other t/*/package.json (t/fc: the E2B
# SDKs), each installed in its own node_modules with its exact pins; skipped
# when every pinned dependency is already there at its version.
step "Node test dependencies"
npm_deps() {
	local dir=$1
	if node -e '
		const fs = require("fs"), path = require("path"), dir = process.argv[1];
		const deps = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")).dependencies || {};
		for (const [name, want] of Object.entries(deps)) {
			let have;
			try { have = JSON.parse(fs.readFileSync(path.join(dir, "node_modules", name, "package.json"), "utf8")).version; } catch {}
			if (have !== want) process.exit(1);
		}' "$dir"; then
		echo "$dir/node_modules is up to date"
		return 0
	fi
	if [ -f "$dir/package-lock.json" ]; then
		(cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts)
	else
		(cd "$dir" && npm install --no-audit --no-fund --ignore-scripts)
	fi
}
for pj in t/package.json t/*/package.json; do
	[ -f "$pj" ] || continue
	case $pj in */node_modules/*) continue ;; esac
	npm_deps "$(dirname "$pj")" || die "installing the Node packages of $pj failed"
done
echo "node $(node --version)"
# The MCP conformance suite and the Node 22 it needs (t/.mcp-tools).
sh t/http/install-conformance.sh || die "t/http/install-conformance.sh failed: the MCP conformance suite could not be installed"

