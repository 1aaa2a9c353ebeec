dnl UCCL_CHECK_OFI: --with-ofi[=PATH]; libfabric transport (src/tp/ofi).
AC_DEFUN([UCCL_CHECK_OFI], [
AC_ARG_WITH([ofi], [AS_HELP_STRING([--with-ofi@<:@=PATH@:>@], [libfabric transport (default: auto)])],
            [], [with_ofi=check])
uccl_have_ofi=no
AS_IF([test "x$with_ofi" != xno], [
    AS_IF([test "x$with_ofi" != xyes && test "x$with_ofi" != xcheck],
          [OFI_CFLAGS="-I$with_ofi/include"; OFI_LIBS="-L$with_ofi/lib -lfabric"; uccl_have_ofi=yes],
          [PKG_CHECK_MODULES([OFI], [libfabric >= 1.10], [uccl_have_ofi=yes], [:])])
    AS_IF([test "x$uccl_have_ofi" != xyes && test "x$with_ofi" != xcheck], [AC_MSG_ERROR([libfabric requested but not found])])
])
AS_IF([test "x$uccl_have_ofi" = xyes], [AC_DEFINE([UCCL_HAVE_OFI], [1], [ofi transport built])
                                       uccl_summary_tp="$uccl_summary_tp ofi"])
AC_SUBST([OFI_CFLAGS])
AC_SUBST([OFI_LIBS])
AM_CONDITIONAL([UCCL_HAVE_OFI], [test "x$uccl_have_ofi" = xyes])
])
