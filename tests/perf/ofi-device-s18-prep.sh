#!/bin/bash
# ofi-device-s18-prep.sh DEST DEBS_DIR [BASE_REV]: lay out ofi18's device A/B in DEST
# (e.g. /work/main/.dev/ofi18): libuccl of BASE_REV (default main; its tree taken with
# git archive into a folder) and of this checkout, each built here CPU-only
# (--without-cuda --without-rocm) into DEST/bin/{base,new}/lib, one perf_ofi (tools/ is the
# same in both) in DEST/bin, libfabric's Debian 12 packages (DEBS_DIR) in DEST/ofi-debs and
# the device script as DEST/run.sh (tests/perf/ofi-device-s18.sh). Built here because the
# device machine has no libfabric headers (the packages carry the runtime only).
set -eu
dest=$(realpath -m "${1:?usage: ofi-device-s18-prep.sh DEST DEBS_DIR [BASE_REV]}")
debs=$(realpath "${2:?}")
rev=${3:-main}
src=$(git rev-parse --show-toplevel)
work=$(mktemp -d /tmp/ofi18-prep.XXXXXX)
build() { # SRC_DIR OUT_NAME
    (cd "$1" && ./autogen.sh >/dev/null 2>&1 && mkdir -p build-dev && cd build-dev &&
        ../configure --without-cuda --without-rocm >configure.log 2>&1 &&
        make -j2 libuccl.la tools/perf_ofi >make.log 2>&1) || { echo "build of $2 failed in $1"; exit 1; }
}
git -C "$src" archive --format=tar --prefix=base/ "$rev" | tar -x -C "$work"
git -C "$src" rev-parse "$rev" > "$work/base.rev"
mkdir -p "$work/new"
git -C "$src" ls-files -z -co --exclude-standard | (cd "$src" && xargs -0 cp --parents -t "$work/new")
build "$work/base" base
build "$work/new" new
rm -rf "$dest" && mkdir -p "$dest/bin/base/lib" "$dest/bin/new/lib" "$dest/ofi-debs"
cp -L "$work/base/build-dev/.libs/libuccl.so.0" "$dest/bin/base/lib/"
cp -L "$work/new/build-dev/.libs/libuccl.so.0" "$dest/bin/new/lib/"
cp -L "$work/new/build-dev/tools/.libs/perf_ofi" "$dest/bin/perf_ofi"
cp "$debs"/*.deb "$dest/ofi-debs/"
cp "$src/tests/perf/ofi-device-s18.sh" "$dest/run.sh"
cp "$src/tests/perf/ofi-pairs-s18.py" "$dest/"
{ echo "base $(cat "$work/base.rev") ($rev)"; echo "new $(git -C "$src" rev-parse HEAD) + working tree";
  md5sum "$dest"/bin/perf_ofi "$dest"/bin/*/lib/libuccl.so.0; } > "$dest/builds.txt"
rm -rf "$work"
cat "$dest/builds.txt"
