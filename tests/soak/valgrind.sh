#!/bin/sh
# make check: t_soak (SOAK_OPS, default 4000 over shm and tcp) once under
# valgrind memcheck: 0 errors, 0 definite leaks (--error-exitcode), and the
# soak's own checks (bytes verified, fd count flat). SKIP without valgrind
# (scripts/install-deps.sh installs it) or in a sanitizer build.
prog=${top_builddir:-.}/tests/soak/t_soak
here=$(cd "$(dirname "$0")" && pwd)
command -v valgrind >/dev/null 2>&1 || { echo "SKIP: valgrind: not installed"; exit 77; }
if grep -Eq '^LIBUCCL_CFLAGS *=.*-fsanitize=address' "${top_builddir:-.}/Makefile" 2>/dev/null; then
    echo "SKIP: valgrind: a sanitizer build (ASan and valgrind do not mix)"
    exit 77
fi
lt=${top_builddir:-.}/libtool
[ -x "$lt" ] && run="$lt --mode=execute" || run=
SOAK_OPS=${SOAK_OPS:-4000}
export SOAK_OPS
echo "# valgrind memcheck: $prog, SOAK_OPS=$SOAK_OPS"
# shellcheck disable=SC2086 # $run: the libtool wrapper, or nothing
exec $run valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
    --show-leak-kinds=definite --track-fds=no --suppressions="$here/valgrind.supp" "$prog"
