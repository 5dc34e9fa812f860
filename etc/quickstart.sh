#!/bin/bash
# The main job, from a fresh Debian 12 machine: install what sandgate needs,
# start the Docker engine, build sandgate and the default sandbox image, then
# run code in a new Docker sandbox through a real session (it prints 42 in
# the result's "stdout").
#
#   bash etc/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SG_SETUP_NO_NODE=1 bash etc/setup.sh
if [ ! -x build/sandgate ]; then
	autoreconf -fi
	mkdir -p build
	(cd build && ../configure --quiet)
fi
make -C build -j2 --no-print-directory >/dev/null
echo "+ sandgate call run_code '{\"code\":\"print(6*7)\"}'"
SANDGATE_PLUGIN_DIR=$PWD/build/.libs build/sandgate call run_code '{"code":"print(6*7)"}'
