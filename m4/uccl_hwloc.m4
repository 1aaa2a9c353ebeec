dnl UCCL_CHECK_HWLOC: --with-hwloc[=PATH]; topology and NIC choice (src/topo).
AC_DEFUN([UCCL_CHECK_HWLOC], [
AC_ARG_WITH([hwloc], [AS_HELP_STRING([--with-hwloc@<:@=PATH@:>@], [hwloc topology (default: auto)])],
            [], [with_hwloc=check])
uccl_have_hwloc=no
AS_IF([test "x$with_hwloc" != xno], [
    AS_IF([test "x$with_hwloc" != xyes && test "x$with_hwloc" != xcheck],
          [HWLOC_CFLAGS="-I$with_hwloc/include"; HWLOC_LIBS="-L$with_hwloc/lib -lhwloc"; uccl_have_hwloc=yes],
          [PKG_CHECK_MODULES([HWLOC], [hwloc >= 2.0], [uccl_have_hwloc=yes], [:])])
    AS_IF([test "x$uccl_have_hwloc" != xyes && test "x$with_hwloc" != xcheck], [AC_MSG_ERROR([hwloc requested but not found])])
])
AS_IF([test "x$uccl_have_hwloc" = xyes], [AC_DEFINE([UCCL_HAVE_HWLOC], [1], [hwloc topology built])])
AC_SUBST([HWLOC_CFLAGS])
AC_SUBST([HWLOC_LIBS])
AM_CONDITIONAL([UCCL_HAVE_HWLOC], [test "x$uccl_have_hwloc" = xyes])
])
