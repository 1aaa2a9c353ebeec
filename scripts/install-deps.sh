#!/bin/sh
# Install the Debian/Ubuntu packages libuccl builds and tests with
# (Debian 12, Ubuntu 24.04). Uses sudo when not run as root.
set -e
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
PKGS="build-essential autoconf automake libtool pkg-config
      libopenmpi-dev openmpi-bin libcunit1-dev libhwloc-dev hwloc
      libibverbs-dev librdmacm-dev rdma-core ibverbs-providers ibverbs-utils perftest
      libfabric-dev libfabric-bin libamdhip64-dev clang libclang-rt-dev
      python3-dev python3-setuptools python3-pip python3-numpy python3-mpi4py python3-pytest"
# shellcheck disable=SC2086
if ! dpkg -s $PKGS >/dev/null 2>&1; then
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PKGS
fi
