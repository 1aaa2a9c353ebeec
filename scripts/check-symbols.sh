#!/bin/sh
# Fail when a built libuccl exports a global symbol without the uccl_ prefix:
# a static link (libuccl.a) must not take names like tcp_open or shm_deliver
# from the application, and libuccl.so exports only the public API (its
# version script). Usage: scripts/check-symbols.sh BUILD_DIR
# (default: $top_builddir, as make check sets it). Prints "N passed, N
# failed" (one check per library found).
set -u
dir=${1:-${top_builddir:-.}}
passed=0 failed=0
for lib in "$dir/.libs/libuccl.a" "$dir/.libs/libuccl.so"; do
    [ -e "$lib" ] || continue
    case $lib in
    *.so) syms=$(nm -D --defined-only "$lib" | awk 'NF == 3 && $2 != "A" {print $3}') ;;
    *) syms=$(nm -g --defined-only "$lib" | awk 'NF == 3 && $2 ~ /^[A-Z]$/ && $2 != "U" && $2 != "W" && $2 != "V" {print $3}') ;;
    esac
    # sanitizer builds add their own markers (__odr_asan.NAME, __asan_*, __sancov_*)
    bad=$(printf '%s\n' "$syms" | grep -v -e '^uccl_' -e '^$' -e '^__odr_asan\.uccl_' \
        -e '^__asan_' -e '^__sancov' | sort -u)
    if [ -n "$bad" ]; then
        echo "FAIL: $lib exports $(printf '%s\n' "$bad" | wc -l) global symbols without the uccl_ prefix:"
        printf '%s\n' "$bad" | head -20 | sed 's/^/  /'
        failed=$((failed + 1))
    else
        echo "PASS: $lib exports only uccl_ symbols ($(printf '%s\n' "$syms" | grep -c .) of them)"
        passed=$((passed + 1))
    fi
done
[ $((passed + failed)) -gt 0 ] || { echo "FAIL: no libuccl.a or libuccl.so under $dir/.libs"; failed=1; }
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
