dnl UCCL_CHECK_MPI: --with-mpi[=PATH]; MPI bootstrap, MPI tests, uccl_perf's MPI reference.
AC_DEFUN([UCCL_CHECK_MPI], [
AC_ARG_WITH([mpi], [AS_HELP_STRING([--with-mpi@<:@=PATH@:>@], [MPI bootstrap (default: auto)])],
            [], [with_mpi=check])
uccl_have_mpi=no
MPI_CFLAGS=; MPI_LIBS=
AS_IF([test "x$with_mpi" != xno], [
    AS_IF([test "x$with_mpi" != xyes && test "x$with_mpi" != xcheck],
          [MPI_CFLAGS="-I$with_mpi/include"; MPI_LIBS="-L$with_mpi/lib -lmpi"; MPIRUN="$with_mpi/bin/mpirun"],
          [PKG_CHECK_MODULES([MPI], [ompi-c], [], [PKG_CHECK_MODULES([MPI], [mpich], [], [:])])
           AC_PATH_PROG([MPIRUN], [mpirun], [])])
    save_CPPFLAGS=$CPPFLAGS; save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $MPI_CFLAGS"; LIBS="$MPI_LIBS $LIBS"
    AC_CHECK_HEADER([mpi.h], [AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]], [[MPI_Init(0, 0);]])],
                                             [uccl_have_mpi=yes])])
    CPPFLAGS=$save_CPPFLAGS; LIBS=$save_LIBS
    AS_IF([test "x$uccl_have_mpi" != xyes && test "x$with_mpi" != xcheck], [AC_MSG_ERROR([MPI requested but not found])])
])
AS_IF([test "x$uccl_have_mpi" = xyes], [AC_DEFINE([UCCL_HAVE_MPI], [1], [MPI bootstrap built])])
AC_SUBST([MPI_CFLAGS])
AC_SUBST([MPI_LIBS])
AC_SUBST([MPIRUN])
AM_CONDITIONAL([UCCL_HAVE_MPI], [test "x$uccl_have_mpi" = xyes])
])
