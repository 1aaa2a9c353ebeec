dnl UCCL_CHECK_CUDA: --with-cuda[=PATH]; CUDA runtime backend of src/gpu.
AC_DEFUN([UCCL_CHECK_CUDA], [
AC_ARG_WITH([cuda], [AS_HELP_STRING([--with-cuda@<:@=PATH@:>@], [CUDA GPU support (default: auto, /usr/local/cuda)])],
            [], [with_cuda=check])
uccl_have_cuda=no
CUDA_CFLAGS=; CUDA_LIBS=
AS_IF([test "x$with_cuda" != xno], [
    cuda_home=/usr/local/cuda
    AS_IF([test "x$with_cuda" != xyes && test "x$with_cuda" != xcheck], [cuda_home=$with_cuda])
    AS_IF([test -d "$cuda_home/include"], [CUDA_CFLAGS="-I$cuda_home/include"])
    for d in "$cuda_home/lib64" "$cuda_home/lib" "$cuda_home/targets/x86_64-linux/lib"; do
        AS_IF([test -d "$d"], [CUDA_LDFLAGS="$CUDA_LDFLAGS -L$d"])
    done
    save_CPPFLAGS=$CPPFLAGS; save_LDFLAGS=$LDFLAGS
    CPPFLAGS="$CPPFLAGS $CUDA_CFLAGS"; LDFLAGS="$LDFLAGS $CUDA_LDFLAGS"
    AC_CHECK_HEADER([cuda_runtime_api.h],
        [AC_CHECK_LIB([cudart], [cudaMalloc], [uccl_have_cuda=yes; CUDA_LIBS="$CUDA_LDFLAGS -lcudart"])])
    CPPFLAGS=$save_CPPFLAGS; LDFLAGS=$save_LDFLAGS
    AS_IF([test "x$uccl_have_cuda" != xyes && test "x$with_cuda" != xcheck], [AC_MSG_ERROR([CUDA requested but not found])])
])
AS_IF([test "x$uccl_have_cuda" = xyes], [AC_DEFINE([UCCL_HAVE_CUDA], [1], [CUDA backend built])])
dnl nvcc builds the device-queue kernels of tests/gpu (b_devq) and gpu_ipc's copy kernel
dnl (src/gpu/sm_copy.cu, embedded as a fatbin: UCCL_GPU_IPC_COPY=sm); without it the library
dnl copies with the copy engines only
NVCC=
AS_IF([test "x$uccl_have_cuda" = xyes],
      [AC_PATH_PROG([NVCC], [nvcc], [], [$cuda_home/bin$PATH_SEPARATOR$PATH])])
AC_ARG_VAR([NVCC_ARCH], [nvcc code generation flags for the test kernels (default: sm_90 and compute_80 PTX)])
AS_IF([test -z "$NVCC_ARCH"], [NVCC_ARCH="-gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80"])
AM_CONDITIONAL([UCCL_HAVE_NVCC], [test -n "$NVCC"])
AS_IF([test -n "$NVCC"], [AC_DEFINE([UCCL_HAVE_SM_COPY], [1], [gpu_ipc's copy kernel built (nvcc)])])
AC_SUBST([CUDA_CFLAGS])
AC_SUBST([CUDA_LIBS])
AM_CONDITIONAL([UCCL_HAVE_CUDA], [test "x$uccl_have_cuda" = xyes])
])
