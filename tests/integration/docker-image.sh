#!/usr/bin/env bash
# Build the docker/podman test image locally (no registry): a root filesystem holding a static
# busybox and its applets, imported with `ENGINE import`; prints the image id the engine
# reports (sha256:<hex>), which the tests pin. Usage: docker-image.sh docker|podman
set -euo pipefail
engine=${1:-docker}
bb=$(command -v busybox)
file -L "$bb" 2>/dev/null | grep -q 'statically linked' || [ -x /bin/busybox ] || {
        echo "docker-image: a static busybox is needed (busybox-static)" >&2; exit 1; }
root=$(mktemp -d /tmp/tfw-image-XXXXXX)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,etc,work,tmp,snapshot,proc,sys,dev,.tentaflake}
cp "$bb" "$root/bin/busybox"
for a in $("$bb" --list); do
        [ "$a" = busybox ] || ln -s busybox "$root/bin/$a"
done
${CC:-cc} -static -O2 -o "$root/bin/nnp-probe" "$(dirname "$0")/../data/docker/nnp-probe.c"
: >"$root/.tentaflake/init"          # the mount point of the bind-mounted init
printf 'root:x:0:0:root:/:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"
tar --numeric-owner --owner=0 --group=0 -C "$root" -cf - . | "$engine" import - 2>/dev/null | tail -n1
