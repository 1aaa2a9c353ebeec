#!/bin/bash
# tests/vm/run.sh CMD [ARG...]: run CMD inside a QEMU virtual machine whose
# kernel has two Soft-RoCE (rdma_rxe) devices, rxe0 and rxe1, joined by a
# veth pair. The VM sees this machine's file system read-only, with the
# current directory (and every directory in RXE_VM_SHARE, colon-separated)
# read-write at the same path, so a tree built here runs there unchanged.
# CMD's output appears on stdout; its exit status is ours.
#   tests/vm/run.sh --check   exit 0 when this machine can boot the VM, else
#                             print why and exit 1 (nothing is booted)
# In CMD's environment: RXE_DEV=rxe0 RXE_IP=192.0.2.1 RXE_DEV2=rxe1
#   RXE_IP2=192.0.2.2, RXE_GID_INDEX (the IPv4 RoCE v2 GID of both devices),
#   HOME=/tmp/rxe-home, TMPDIR=/tmp (tmpfs), OMPI_ALLOW_RUN_AS_ROOT{,_CONFIRM}=1
# Settings: RXE_VM_TIMEOUT (s, default 600), RXE_VM_MEM (2G), RXE_VM_CPUS (2),
#   RXE_VM_CACHE (~/.cache/uccl-vm), RXE_VM_VERBOSE=1 (guest kernel messages)
# Exit status: CMD's own; 124 on timeout; 125 when the VM could not be set
# up (the message says why). See tests/vm/README.md.
set -uo pipefail
VM_NAME=run.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$(readlink -f "$0")")/lib.sh"

case ${1:-} in
"" | -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 125 ;;
--check) vm_preflight pair; exit ;;
esac
reason=$(vm_preflight pair) || vm_fail "$reason"
initrd=$(vm_initrd) || exit 125

ctl=$(mktemp -d /tmp/uccl-vm.XXXXXX) || vm_fail "mktemp"
trap 'rm -rf "$ctl"' EXIT
echo "VM_MODE=pair VM_HOSTNAME=rxe-vm" >"$ctl/config"
IFS=: read -ra extra <<<"${RXE_VM_SHARE:-}"
vm_shares "$PWD" "${extra[@]}" >"$ctl/shares"
vm_write_cmd "$ctl" "$@"
vm_qemu "$ctl" "$initrd" -nic none
qrc=$?
[ "$qrc" = 124 ] && { echo "$VM_NAME: timed out after ${VM_TIMEOUT}s" >&2; exit 124; }
[ -s "$ctl/rc" ] || vm_fail "the VM stopped before the command finished (qemu status $qrc; RXE_VM_VERBOSE=1 shows why)"
exit "$(cat "$ctl/rc")"
