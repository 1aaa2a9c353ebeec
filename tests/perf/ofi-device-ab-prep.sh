#!/bin/bash
# ofi-device-ab-prep.sh DEST DEBS_DIR NAME=REV...: lay out the ofi A/B of
# tests/perf/ofi-device-ab.sh in DEST (e.g. /work/main/.dev/NAME; replaces
# ofi18's ofi-device-s18-prep.sh). For each NAME=REV, libuccl of REV (its tree
# taken with git archive into a folder; REV "." = this checkout's working tree)
# built here CPU-only (--without-cuda --without-rocm) into DEST/bin/NAME/lib;
# one perf_ofi (of the last NAME; tools/ uses the public API only) in DEST/bin,
# libfabric's Debian 12 packages (DEBS_DIR) in DEST/ofi-debs, the device script
# as DEST/run.sh and its summary ofi-ab.py. Built here because the device
# machine has no libfabric headers (the packages carry the runtime only).
# Run it as: VARIANTS="NAME..." OUT=$OUT DEST/run.sh
set -eu
dest=$(realpath -m "${1:?usage: ofi-device-ab-prep.sh DEST DEBS_DIR NAME=REV...}")
debs=$(realpath "${2:?}")
shift 2
[ $# -gt 0 ] || { echo "no NAME=REV given"; exit 1; }
src=$(git rev-parse --show-toplevel)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/ofi-ab-prep.XXXXXX)
rm -rf "$dest" && mkdir -p "$dest/bin" "$dest/ofi-debs"
: > "$dest/builds.txt"
for nr in "$@"; do
    name=${nr%%=*} rev=${nr#*=}
    mkdir -p "$work/$name"
    if [ "$rev" = . ]; then
        git -C "$src" ls-files -z -co --exclude-standard | (cd "$src" && xargs -0 cp --parents -t "$work/$name")
        echo "$name $(git -C "$src" rev-parse HEAD) + working tree" >> "$dest/builds.txt"
    else
        git -C "$src" archive --format=tar "$rev" | tar -x -C "$work/$name"
        echo "$name $(git -C "$src" rev-parse "$rev") ($rev)" >> "$dest/builds.txt"
    fi
    (cd "$work/$name" && ./autogen.sh >/dev/null 2>&1 && mkdir -p build-dev && cd build-dev &&
        ../configure --without-cuda --without-rocm >configure.log 2>&1 &&
        make -j2 libuccl.la tools/perf_ofi >make.log 2>&1) || { echo "build of $name failed in $work/$name"; exit 1; }
    mkdir -p "$dest/bin/$name/lib"
    cp -L "$work/$name/build-dev/.libs/libuccl.so.0" "$dest/bin/$name/lib/"
    cp -L "$work/$name/build-dev/tools/.libs/perf_ofi" "$dest/bin/perf_ofi"
done
cp "$debs"/*.deb "$dest/ofi-debs/"
cp "$here/ofi-device-ab.sh" "$dest/run.sh"
cp "$here/ofi-ab.py" "$dest/"
md5sum "$dest"/bin/perf_ofi "$dest"/bin/*/lib/libuccl.so.0 >> "$dest/builds.txt"
rm -rf "$work"
cat "$dest/builds.txt"
