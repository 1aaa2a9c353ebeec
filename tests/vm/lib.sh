# shellcheck shell=bash
# tests/vm/lib.sh: what run.sh and cluster.sh share (sourced, not run):
# settings, the check that this machine can boot the VM, the initramfs, and
# the QEMU command line. See tests/vm/README.md.

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VM_TIMEOUT=${RXE_VM_TIMEOUT:-600}
VM_MEM=${RXE_VM_MEM:-2G}
VM_CPUS=${RXE_VM_CPUS:-2}
VM_CACHE=${RXE_VM_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/uccl-vm}
VM_VERBOSE=${RXE_VM_VERBOSE:-0}
# A machine without the packages (tests/vm/bundle.sh): RXE_VM_QEMU (the QEMU
# command), RXE_VM_KERNEL and RXE_VM_INITRD (a kernel image and the initramfs
# built for it, both set or neither), RXE_VM_ACCEL (QEMU's -accel, e.g.
# tcg,thread=multi or kvm; default QEMU's own choice, TCG).
VM_QEMU=${RXE_VM_QEMU:-qemu-system-x86_64}
VM_ACCEL=${RXE_VM_ACCEL:-}
# Kernel modules the guest loads, with their dependencies (modprobe resolves
# them against the guest kernel; built-in ones are skipped).
VM_MODULES="virtio_pci virtio_net 9pnet_virtio 9p veth crc32_generic rdma_rxe ib_uverbs rdma_ucm ib_umad"

vm_fail() { echo "${VM_NAME:-vm}: $*" >&2; exit 125; }

vm_kernel() { # the newest kernel under /boot whose modules include rdma_rxe
	local k v
	[ -n "${RXE_VM_KERNEL:-}" ] && { echo bundle; return; }
	for k in /boot/vmlinuz-*; do
		[ -e "$k" ] || continue
		v=${k#/boot/vmlinuz-}
		compgen -G "/lib/modules/$v/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko*" >/dev/null && echo "$v"
	done | sort -rV | head -1
}

# vm_preflight pair|cluster: can this machine boot the VM (for "cluster",
# also launch across VMs)? Prints why not (one line per missing piece, naming
# the package) and returns 1; returns 0 when everything is there.
vm_preflight() {
	local why=() c kver
	if [ -n "${RXE_VM_KERNEL:-}${RXE_VM_INITRD:-}" ]; then # a bundle: nothing is built here
		command -v "$VM_QEMU" >/dev/null || why+=("no $VM_QEMU (RXE_VM_QEMU)")
		[ -r "${RXE_VM_KERNEL:-}" ] || why+=("cannot read RXE_VM_KERNEL '${RXE_VM_KERNEL:-}'")
		[ -r "${RXE_VM_INITRD:-}" ] || why+=("cannot read RXE_VM_INITRD '${RXE_VM_INITRD:-}'")
		[ ${#why[@]} = 0 ] && return 0
		printf 'cannot boot the Soft-RoCE VM here: %s\n' "${why[@]}"
		return 1
	fi
	for c in qemu-system-x86_64:qemu-system-x86 modprobe:kmod cpio:cpio ip:iproute2 rdma:iproute2 \
		gzip:gzip; do
		command -v "${c%%:*}" >/dev/null || why+=("no ${c%%:*} (package ${c#*:})")
	done
	/bin/busybox --list 2>/dev/null | grep -x insmod >/dev/null ||
		why+=("no /bin/busybox with insmod (package busybox-static)")
	compgen -G "/usr/lib/*/libibverbs/librxe-rdmav*.so" >/dev/null ||
		why+=("no Soft-RoCE verbs provider librxe (package ibverbs-providers)")
	kver=$(vm_kernel)
	if [ -z "$kver" ]; then
		why+=("no kernel image /boot/vmlinuz-* with the rdma_rxe module (package linux-image-amd64 on Debian, linux-image-generic on Ubuntu)")
	elif [ ! -r "/boot/vmlinuz-$kver" ]; then
		why+=("cannot read /boot/vmlinuz-$kver (Ubuntu makes it readable by root only: run as root)")
	fi
	if [ "$1" = cluster ]; then
		for c in dropbear:dropbear-bin dbclient:dropbear-bin dropbearkey:dropbear-bin mpirun:openmpi-bin; do
			command -v "${c%%:*}" >/dev/null || why+=("no ${c%%:*} (package ${c#*:})")
		done
	fi
	[ ${#why[@]} = 0 ] && return 0
	printf 'cannot boot the Soft-RoCE VM here: %s\n' "${why[@]}"
	echo "(scripts/install-deps.sh installs what is missing)"
	return 1
}

# vm_initrd: prints the path of the cached initramfs for the newest rxe kernel
# (busybox, the modules, guest-init.sh as /init), building it when missing or
# when guest-init.sh or the module list changed.
vm_initrd() {
	local kver build m base key initrd
	[ -n "${RXE_VM_INITRD:-}" ] && { echo "$RXE_VM_INITRD"; return; }
	kver=$(vm_kernel)
	key=$( { cat "$VM_DIR/guest-init.sh"; echo "$VM_MODULES"; } | md5sum | cut -c1-12)
	initrd=$VM_CACHE/initrd-$kver-$key.gz
	mkdir -p "$VM_CACHE" || vm_fail "cannot create $VM_CACHE"
	(
		flock 9
		[ -s "$initrd" ] && exit 0
		build=$(mktemp -d) || exit 1
		trap 'rm -rf "$build"' EXIT
		mkdir -p "$build"/{bin,dev,proc,sys,newroot,ctl,lib/modules}
		cp /bin/busybox "$build/bin/busybox" || exit 1
		# shellcheck disable=SC2086 # the module list is words
		for m in $(modprobe -S "$kver" --show-depends -a $VM_MODULES 2>/dev/null |
			awk '$1 == "insmod" && !seen[$2]++ { print $2 }'); do
			base=$(basename "$m"); base=${base%.xz}; base=${base%.zst}
			case $m in
			*.xz) xz -dc "$m" >"$build/lib/modules/$base" ;;
			*.zst) zstd -qdc "$m" >"$build/lib/modules/$base" ;;
			*) cp "$m" "$build/lib/modules/$base" ;;
			esac || { echo "cannot copy module $m" >&2; exit 1; }
			echo "$base" >>"$build/lib/modules/order"
		done
		[ -s "$build/lib/modules/order" ] || { echo "modprobe found none of: $VM_MODULES" >&2; exit 1; }
		install -m 755 "$VM_DIR/guest-init.sh" "$build/init" || exit 1
		(cd "$build" && find . | cpio -o -H newc --quiet | gzip -1) >"$initrd.tmp" &&
			mv "$initrd.tmp" "$initrd"
	) 9>"$VM_CACHE/.lock" || vm_fail "cannot build the initramfs $initrd"
	echo "$initrd"
}

# vm_shares DIR...: the directories to mount read-write in the guest at their
# own paths (the guest's /tmp is a tmpfs, so anything under it must be
# shared), without those inside another one; one per line.
vm_shares() {
	local d s keep kept=()
	for d in "$@"; do readlink -f "$d"; done | sort -u | while read -r d; do
		keep=1
		for s in "${kept[@]}"; do case $d/ in "$s"/*) keep=0 ;; esac; done
		[ $keep = 1 ] && { kept+=("$d"); echo "$d"; }
	done
}

# vm_write_cmd CTL CMD...: the command, the caller's environment and
# directory, as a script the guest runs (less what the guest sets itself).
vm_write_cmd() {
	local ctl=$1
	shift
	{
		export -p | grep -vE '^declare -x (HOME|TMPDIR|PWD|OLDPWD|SHLVL|_)='
		printf 'cd %q || exit 125\n' "$PWD"
		printf 'exec'; printf ' %q' "$@"; printf '\n'
	} >"$ctl/cmd.sh"
}

# vm_qemu CTL INITRD [QEMU-ARGS...]: boot one guest whose control directory
# is CTL (config, cmd.sh, shares; it writes rc there), the host root
# read-only and every directory listed in CTL/shares read-write. Its console
# goes to stdout (only what follows the guest's start marker, unless
# RXE_VM_VERBOSE=1). Returns QEMU's status (124 on timeout).
vm_qemu() {
	local ctl=$1 initrd=$2 quiet="quiet loglevel=0" i=0 d args=()
	shift 2
	[ "$VM_VERBOSE" = 1 ] && quiet="loglevel=6"
	while read -r d; do
		args+=(-virtfs "local,path=$d,mount_tag=share$i,security_model=none,multidevs=remap")
		i=$((i + 1))
	done <"$ctl/shares"
	[ -n "$VM_ACCEL" ] && args+=(-accel "$VM_ACCEL")
	timeout --foreground -k 5 "$VM_TIMEOUT" "$VM_QEMU" \
		-machine q35 -cpu max -smp "$VM_CPUS" -m "$VM_MEM" -nographic -no-reboot \
		-kernel "${RXE_VM_KERNEL:-/boot/vmlinuz-$(vm_kernel)}" -initrd "$initrd" \
		-append "console=ttyS0 $quiet panic=-1 rdinit=/init" \
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
		-virtfs "local,path=$ctl,mount_tag=ctl,security_model=none" \
		"${args[@]}" "$@" </dev/null |
		if [ "$VM_VERBOSE" = 1 ]; then sed -u 's/\r$//'; else sed -u -e 's/\r$//' -e '0,/@@uccl-vm@@$/d'; fi
	return "${PIPESTATUS[0]}"
}
