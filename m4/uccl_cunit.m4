dnl UCCL_CHECK_CUNIT: CUnit for tests/unit (make check skips them without it).
AC_DEFUN([UCCL_CHECK_CUNIT], [
uccl_have_cunit=no
PKG_CHECK_MODULES([CUNIT], [cunit], [uccl_have_cunit=yes],
    [AC_CHECK_LIB([cunit], [CU_initialize_registry], [uccl_have_cunit=yes; CUNIT_LIBS=-lcunit])])
AC_SUBST([CUNIT_CFLAGS])
AC_SUBST([CUNIT_LIBS])
AM_CONDITIONAL([UCCL_HAVE_CUNIT], [test "x$uccl_have_cunit" = xyes])
])
