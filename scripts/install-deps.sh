#!/bin/sh
# Install the Debian/Ubuntu packages libuccl builds and tests with
# (Debian 12, Ubuntu 24.04). Uses sudo when not run as root.
set -e
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
PKGS="build-essential autoconf automake libtool pkg-config
      libopenmpi-dev openmpi-bin libcunit1-dev libhwloc-dev hwloc libssl-dev
      libibverbs-dev librdmacm-dev rdma-core ibverbs-providers ibverbs-utils perftest
      libfabric-dev libfabric-bin libamdhip64-dev clang libclang-rt-dev
      python3-dev python3-setuptools python3-pip python3-numpy python3-mpi4py python3-pytest
      valgrind nftables"
# nftables: tests/fault/netloss.sh drops packets with it in a network namespace
# The Soft-RoCE VM of tests/vm (the verbs suite, the two-VM cluster): QEMU,
# a kernel image with rdma_rxe for the guest, the initramfs tools, dropbear
# for mpirun across the VMs, UCX's perftest for comparison. Debian's kernel
# image package is linux-image-amd64; Ubuntu's is linux-image-generic (which
# brings linux-modules-extra, where rdma_rxe is).
kernel=linux-image-amd64
# shellcheck disable=SC1091
[ -r /etc/os-release ] && . /etc/os-release && [ "${ID:-}" = ubuntu ] && kernel=linux-image-generic
PKGS="$PKGS qemu-system-x86 $kernel busybox-static kmod cpio iproute2 zstd xz-utils
      dropbear-bin ucx-utils"
# shellcheck disable=SC2086
if ! dpkg -s $PKGS >/dev/null 2>&1; then
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PKGS
fi
