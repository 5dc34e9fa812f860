#!/bin/bash
# The main job, from a fresh Debian 12 machine, no Docker needed: install what
# sandgate needs (the build's packages, bubblewrap and python3), build it,
# then run code in a new sandbox through a real session (it prints 42 in the
# result's "stdout").  The sandbox is the default backend's: a Docker
# container when an engine answers, else a local bubblewrap jail.
#
#   bash etc/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SG_SETUP_MAIN=1 bash etc/setup.sh
if [ ! -x build/sandgate ]; then
	autoreconf -fi
	mkdir -p build
	(cd build && ../configure --quiet)
fi
make -C build -j2 --no-print-directory >/dev/null
echo "+ sandgate call run_code '{\"code\":\"print(6*7)\"}'"
SANDGATE_PLUGIN_DIR=$PWD/build/.libs build/sandgate call run_code '{"code":"print(6*7)"}'
