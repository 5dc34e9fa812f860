#!/bin/sh
# Build sandgate's default sandbox image locally: no registry is reachable, so the
# root filesystem comes from Debian's mirror through debootstrap and is imported.
#
# usage: etc/image/build.sh [IMAGE]   (default sandgate/base:1)
# The image is rebuilt only when this recipe changed: its sha256 is kept as a label.
set -eu
image=${1:-sandgate/base:1}
suite=${SG_IMAGE_SUITE:-bookworm}
mirror=${SG_IMAGE_MIRROR:-http://deb.debian.org/debian}
packages=bash,python3,python3-matplotlib,python3-numpy,nodejs,ripgrep,procps,ca-certificates
recipe=$(cat "$0" | sha256sum | cut -c1-16)

have=$(docker image inspect -f '{{ index .Config.Labels "org.sandgate.recipe" }}' "$image" 2>/dev/null || true)
if [ "$have" = "$recipe" ]; then
	echo "image $image is up to date (recipe $recipe)"
	exit 0
fi
root=$(mktemp -d /var/tmp/sandgate-image.XXXXXX)
trap 'rm -rf "$root"' EXIT INT TERM
echo "debootstrap $suite from $mirror into $root (about a minute)"
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$root.log" 2>&1 || {
	tail -n 20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"*
mkdir -p "$root/workspace"
tar -C "$root" -c . | docker import \
	-c 'WORKDIR /workspace' \
	-c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
	-c 'CMD ["/bin/sleep","infinity"]' \
	-c "LABEL org.sandgate.recipe=$recipe" \
	- "$image" >/dev/null
echo "built $image (recipe $recipe)"
