dnl UCCL_CHECK_FAKE_GPU: --enable-fake-gpu; the test-only GPU backend src/gpu/fake.c
dnl (two "devices" whose memory is host shared memory), so GPU code paths run on machines
dnl without a GPU. Only without CUDA and ROCm; never for production builds.
AC_DEFUN([UCCL_CHECK_FAKE_GPU], [
AC_ARG_ENABLE([fake-gpu],
    [AS_HELP_STRING([--enable-fake-gpu], [test-only GPU backend on host memory (needs --without-cuda, no ROCm)])],
    [], [enable_fake_gpu=no])
AS_IF([test "x$enable_fake_gpu" = xyes], [
    AS_IF([test "x$uccl_have_cuda" = xyes || test "x$uccl_have_rocm" = xyes],
          [AC_MSG_ERROR([--enable-fake-gpu needs a build without CUDA and ROCm (--without-cuda --without-rocm)])])
    AC_DEFINE([UCCL_HAVE_FAKE_GPU], [1], [test-only fake GPU backend built])
    uccl_summary_tp="$uccl_summary_tp gpu_ipc(fake-gpu)"
    AC_MSG_WARN([fake GPU backend: GPU memory is host memory; for tests only])])
AM_CONDITIONAL([UCCL_GPU_FAKE], [test "x$enable_fake_gpu" = xyes])
])
