#!/bin/sh
# A user's static link: only libuccl.a in a lib directory, the flags from
# `pkg-config --static` on this build's uccl.pc (libdir and includedir pointed
# at the build tree), then the program runs. Fails on an undefined symbol,
# i.e. a dependency that uccl.pc does not name.
set -eu
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
if ! command -v "$PKG_CONFIG" >/dev/null 2>&1; then
    echo "SKIP: static link through pkg-config: $PKG_CONFIG not installed"
    exit 77
fi
if [ ! -f "$top_builddir/.libs/libuccl.a" ]; then
    echo "SKIP: static link through pkg-config: no libuccl.a (configured with --disable-static)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/lib"
cp "$top_builddir/.libs/libuccl.a" "$tmp/lib/"
pc() {
    PKG_CONFIG_PATH=$top_builddir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} "$PKG_CONFIG" \
        --define-variable=libdir="$tmp/lib" --define-variable=includedir="$top_srcdir/include" "$@" uccl
}
cflags=$(pc --cflags)
libs=$(pc --static --libs)
echo "pkg-config --static --libs uccl: $libs"
# shellcheck disable=SC2086 # word splitting of the flags is intended
${CC:-cc} ${LIBUCCL_CFLAGS:-} $cflags "$top_srcdir/tests/pkgconfig/static_link.c" -o "$tmp/static_link" \
    ${LDFLAGS:-} $libs
if ldd "$tmp/static_link" 2>/dev/null | grep -q 'libuccl'; then
    echo "FAIL: the program loads a shared libuccl"
    exit 1
fi
"$tmp/static_link"
