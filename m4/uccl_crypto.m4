dnl UCCL_CHECK_CRYPTO: --with-libcrypto; OpenSSL's libcrypto (HMAC-SHA256,
dnl RAND_bytes) for the connection setup's challenge-response (src/util/crypto.c).
dnl Without its headers (e.g. a machine with libssl3 but no libssl-dev) the
dnl library is loaded at run time instead (libcrypto.so.3, then .so.1.1);
dnl where neither exists, engine creation fails saying so (docs/DESIGN.md).
AC_DEFUN([UCCL_CHECK_CRYPTO], [
AC_ARG_WITH([libcrypto], [AS_HELP_STRING([--with-libcrypto],
            [link OpenSSL's libcrypto (default: auto; without it, it is loaded at run time)])],
            [], [with_libcrypto=check])
uccl_have_crypto=no
AS_IF([test "x$with_libcrypto" != xno], [
    PKG_CHECK_MODULES([CRYPTO], [libcrypto >= 1.1], [uccl_have_crypto=yes], [:])
    AS_IF([test "x$uccl_have_crypto" != xyes && test "x$with_libcrypto" = xyes],
          [AC_MSG_ERROR([libcrypto requested but not found (Debian/Ubuntu: libssl-dev)])])
])
AS_IF([test "x$uccl_have_crypto" = xyes],
      [AC_DEFINE([UCCL_HAVE_CRYPTO], [1], [OpenSSL libcrypto linked])
       uccl_summary_crypto="yes (linked)"],
      [AC_SEARCH_LIBS([dlopen], [dl])
       uccl_summary_crypto="no headers: libcrypto.so.3/.so.1.1 loaded at run time"])
AC_SUBST([CRYPTO_CFLAGS])
AC_SUBST([CRYPTO_LIBS])
AM_CONDITIONAL([UCCL_HAVE_CRYPTO], [test "x$uccl_have_crypto" = xyes])
])
