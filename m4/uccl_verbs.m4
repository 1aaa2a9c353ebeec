dnl UCCL_CHECK_VERBS: --with-verbs[=PATH]; RDMA verbs transport (src/tp/verbs).
AC_DEFUN([UCCL_CHECK_VERBS], [
AC_ARG_WITH([verbs], [AS_HELP_STRING([--with-verbs@<:@=PATH@:>@], [RDMA verbs transport (default: auto)])],
            [], [with_verbs=check])
uccl_have_verbs=no
VERBS_CFLAGS=; VERBS_LIBS=
AS_IF([test "x$with_verbs" != xno], [
    AS_IF([test "x$with_verbs" != xyes && test "x$with_verbs" != xcheck],
          [VERBS_CFLAGS="-I$with_verbs/include"; VERBS_LDFLAGS="-L$with_verbs/lib"])
    save_CPPFLAGS=$CPPFLAGS; save_LDFLAGS=$LDFLAGS
    CPPFLAGS="$CPPFLAGS $VERBS_CFLAGS"; LDFLAGS="$LDFLAGS $VERBS_LDFLAGS"
    AC_CHECK_HEADER([infiniband/verbs.h],
        [AC_CHECK_LIB([ibverbs], [ibv_open_device], [uccl_have_verbs=yes; VERBS_LIBS="$VERBS_LDFLAGS -libverbs"])])
    AS_IF([test "x$uccl_have_verbs" = xyes],
        [AC_CHECK_DECLS([ibv_reg_dmabuf_mr, IBV_ACCESS_RELAXED_ORDERING], [], [], [[#include <infiniband/verbs.h>]])])
    CPPFLAGS=$save_CPPFLAGS; LDFLAGS=$save_LDFLAGS
    AS_IF([test "x$uccl_have_verbs" != xyes && test "x$with_verbs" != xcheck], [AC_MSG_ERROR([verbs requested but not found])])
])
AS_IF([test "x$uccl_have_verbs" = xyes], [AC_DEFINE([UCCL_HAVE_VERBS], [1], [verbs transport built])
                                         uccl_summary_tp="$uccl_summary_tp verbs"])
AC_SUBST([VERBS_CFLAGS])
AC_SUBST([VERBS_LIBS])
AM_CONDITIONAL([UCCL_HAVE_VERBS], [test "x$uccl_have_verbs" = xyes])
])
