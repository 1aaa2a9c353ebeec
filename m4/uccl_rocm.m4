dnl UCCL_CHECK_ROCM: --with-rocm[=PATH]; HIP backend of src/gpu (used when CUDA is absent).
AC_DEFUN([UCCL_CHECK_ROCM], [
AC_ARG_WITH([rocm], [AS_HELP_STRING([--with-rocm@<:@=PATH@:>@], [ROCm/HIP GPU support (default: auto)])],
            [], [with_rocm=check])
uccl_have_rocm=no
ROCM_CFLAGS=; ROCM_LIBS=
AS_IF([test "x$with_rocm" != xno && test "x$uccl_have_cuda" != xyes], [
    AS_IF([test "x$with_rocm" != xyes && test "x$with_rocm" != xcheck],
          [ROCM_CFLAGS="-I$with_rocm/include"; ROCM_LDFLAGS="-L$with_rocm/lib"])
    save_CPPFLAGS=$CPPFLAGS; save_LDFLAGS=$LDFLAGS
    CPPFLAGS="$CPPFLAGS $ROCM_CFLAGS -D__HIP_PLATFORM_AMD__"; LDFLAGS="$LDFLAGS $ROCM_LDFLAGS"
    AC_CHECK_HEADER([hip/hip_runtime_api.h],
        [AC_CHECK_LIB([amdhip64], [hipMalloc], [uccl_have_rocm=yes; ROCM_LIBS="$ROCM_LDFLAGS -lamdhip64"])])
    AS_IF([test "x$uccl_have_rocm" = xyes],
        [AC_CHECK_DECLS([hipMemGetHandleForAddressRange], [], [], [[#include <hip/hip_runtime_api.h>]])])
    CPPFLAGS=$save_CPPFLAGS; LDFLAGS=$save_LDFLAGS
    AS_IF([test "x$uccl_have_rocm" != xyes && test "x$with_rocm" != xcheck], [AC_MSG_ERROR([ROCm/HIP requested but not found])])
    ROCM_CFLAGS="$ROCM_CFLAGS -D__HIP_PLATFORM_AMD__"
])
AS_IF([test "x$uccl_have_rocm" = xyes], [AC_DEFINE([UCCL_HAVE_ROCM], [1], [HIP backend built])])
AC_SUBST([ROCM_CFLAGS])
AC_SUBST([ROCM_LIBS])
AM_CONDITIONAL([UCCL_HAVE_ROCM], [test "x$uccl_have_rocm" = xyes])
])
