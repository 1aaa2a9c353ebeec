dnl UCCL_CHECK_PYTHON: --enable-python (default: auto); the CPython extension
dnl in python/, built against the in-tree libuccl when Python headers exist.
dnl PYTHON picks the interpreter; without it the first of python3 (PATH) and
dnl /usr/bin/python3 that has its headers is used, preferring one that can
dnl also run the tests (numpy, mpi4py, pytest: Debian's python3-* packages
dnl live in /usr/bin/python3's path, not in a python3 from pyenv or a venv).
AC_DEFUN([UCCL_CHECK_PYTHON], [
AC_ARG_ENABLE([python],
    [AS_HELP_STRING([--enable-python], [build the Python binding (default: auto, when Python headers are found)])],
    [], [enable_python=check])
AC_ARG_VAR([PYTHON], [Python interpreter for the binding and its tests])
uccl_have_python=no
uccl_python_tests=no
PYTHON_CFLAGS=
AS_IF([test "x$enable_python" != xno], [
    AC_MSG_CHECKING([for Python with development headers])
    uccl_py_cands=$PYTHON
    AS_IF([test -z "$uccl_py_cands"], [
        uccl_py_cands="$(command -v python3 2>/dev/null) /usr/bin/python3"])
    uccl_py_found=
    for uccl_py in $uccl_py_cands; do
        test -x "$uccl_py" || uccl_py=$(command -v "$uccl_py" 2>/dev/null) || continue
        uccl_py_inc=$("$uccl_py" -c 'import sysconfig; print(sysconfig.get_paths()[["include"]])' 2>/dev/null) || continue
        test -f "$uccl_py_inc/Python.h" || continue
        AS_IF([test -z "$uccl_py_found"], [uccl_py_found=$uccl_py; uccl_py_found_inc=$uccl_py_inc])
        AS_IF(["$uccl_py" -c 'import numpy, mpi4py, pytest' >/dev/null 2>&1], [
            uccl_py_found=$uccl_py; uccl_py_found_inc=$uccl_py_inc; uccl_python_tests=yes; break])
    done
    AS_IF([test -n "$uccl_py_found"], [
        PYTHON=$uccl_py_found
        PYTHON_CFLAGS="-I$uccl_py_found_inc"
        uccl_have_python=yes
        AC_MSG_RESULT([$PYTHON])],
        [AC_MSG_RESULT([no])])
    AS_IF([test "x$uccl_have_python" != xyes && test "x$enable_python" = xyes],
          [AC_MSG_ERROR([--enable-python: no Python with headers found (install python3-dev or set PYTHON)])])
])
AS_IF([test "x$uccl_have_python" = xyes], [
    AM_PATH_PYTHON([3.7])
    uccl_summary_python="yes ($PYTHON; tests: $uccl_python_tests)"],
    [uccl_summary_python=no])
AC_SUBST([PYTHON_CFLAGS])
AM_CONDITIONAL([UCCL_HAVE_PYTHON], [test "x$uccl_have_python" = xyes])
])
