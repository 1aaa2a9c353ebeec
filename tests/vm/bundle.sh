#!/bin/bash
# tests/vm/bundle.sh OUT.tar.xz: pack what the Soft-RoCE VM needs into one
# archive for a machine that has none of the packages (no QEMU, no Debian
# kernel, e.g. an Ubuntu host): this machine's qemu-system-x86_64 with the
# shared libraries it loads (glibc excepted: the other machine's, at least as
# new, serves), its TCG module and firmware, the kernel image and the
# initramfs lib.sh builds for it, and, for a root without them, the guest's
# tools (ip, rdma, sysctl) and libibverbs with the rxe provider, with theirs.
# On the other machine: tar xJf OUT.tar.xz -C DIR; . DIR/vm/env.sh (sets
# RXE_VM_QEMU, RXE_VM_KERNEL, RXE_VM_INITRD; puts wrappers of DIR/vm/guest-bin in /usr/sbin (the guest PATH)
# only where the root lacks a tool). The guest still chroots into that
# machine's root (lib.sh): the tools there must run in it. See README.md.
set -euo pipefail
out=${1:?usage: bundle.sh OUT.tar.xz}
here=$(cd "$(dirname "$0")" && pwd)
VM_NAME=bundle.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"
reason=$(vm_preflight pair) || vm_fail "$reason"
initrd=$(vm_initrd)
kver=$(vm_kernel)
qemu=$(command -v qemu-system-x86_64)
b=$(mktemp -d)
trap 'rm -rf "$b"' EXIT
mkdir -p "$b"/vm/{bin,lib,modules,fw,guest-bin,guest-lib}

libs_of() { # the non-glibc shared libraries of the given programs and libraries
	ldd "$@" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
		grep -vE '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux-x86-64)\.so' || true
}
cp -L "$qemu" "$b/vm/bin/"
# shellcheck disable=SC2046 # one path per word
cp -L $(libs_of "$qemu") "$b/vm/lib/"
cp -L /usr/lib/x86_64-linux-gnu/qemu/accel-tcg-x86_64.so "$b/vm/modules/"
cp -L /usr/share/seabios/bios-256k.bin /usr/share/seabios/vgabios-stdvga.bin \
	/usr/share/qemu/kvmvapic.bin /usr/share/qemu/linuxboot_dma.bin "$b/vm/fw/"
cp -L "/boot/vmlinuz-$kver" "$b/vm/vmlinuz"
cp -L "$initrd" "$b/vm/initrd.gz"
cat >"$b/vm/bin/qemu" <<'EOF'
#!/bin/sh
d=$(cd "$(dirname "$0")/.." && pwd)
LD_LIBRARY_PATH=$d/lib QEMU_MODULE_DIR=$d/modules exec "$d/bin/qemu-system-x86_64" -L "$d/fw" "$@"
EOF
# the guest's tools and verbs libraries, for a root that lacks them
prov=$(ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so)
for t in ip rdma sysctl; do cp -L "$(command -v $t)" "$b/vm/guest-bin/$t.real"; done
# shellcheck disable=SC2046
cp -L $(libs_of "$b"/vm/guest-bin/*.real "$prov") \
	"$prov" "$b/vm/guest-lib/"
chmod +x "$b/vm/bin/qemu"
# the references of tests/rxe/bench.sh (perftest, ucx_perftest), for a root
# without them: UCX's libraries and modules always go with ucx_perftest (it
# needs its own version's), the others (refs/opt) serve only where the root
# lacks one (env.sh); libibverbs is the root's, or guest-lib's
refs=()
for t in ib_write_bw ib_read_bw ib_send_bw ucx_perftest; do
	command -v $t >/dev/null && refs+=("$(command -v $t)")
done
if [ ${#refs[@]} -gt 0 ]; then
	mkdir -p "$b"/vm/refs/{bin,lib/ucx,opt}
	cp -L "${refs[@]}" "$b/vm/refs/bin/"
	ucxm=$(ls /usr/lib/x86_64-linux-gnu/ucx/libuct_*.so.0 2>/dev/null || true)
	# shellcheck disable=SC2086 # one path per word
	[ -n "$ucxm" ] && cp -L $ucxm "$b/vm/refs/lib/ucx/"
	# shellcheck disable=SC2046,SC2086
	for l in $(libs_of "${refs[@]}" $ucxm | grep -v '/libibverbs\.so'); do
		case ${l##*/} in
		libuc[pstm].so* | libuct_*) cp -L "$l" "$b/vm/refs/lib/" ;;
		*) cp -L "$l" "$b/vm/refs/opt/" ;;
		esac
	done
fi
cat >"$b/vm/env.sh" <<'EOF'
# shellcheck shell=sh
# sourced: the bundle's QEMU, kernel and initramfs for tests/vm/lib.sh; the
# guest's tools where this root lacks them (the guest chroots into it)
vm_b=$(cd "$(dirname "${BASH_SOURCE:-$0}")" && pwd)
chmod +x "$vm_b"/bin/* "$vm_b"/guest-bin/*
export RXE_VM_QEMU=$vm_b/bin/qemu RXE_VM_KERNEL=$vm_b/vmlinuz RXE_VM_INITRD=$vm_b/initrd.gz
for t in ip rdma sysctl; do
	command -v $t >/dev/null && continue
	mkdir -p /usr/sbin &&
		printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/guest-lib exec %s/guest-bin/%s.real "$@"\n' "$vm_b" "$vm_b" $t \
			>/usr/sbin/$t && chmod +x /usr/sbin/$t
done
# libibverbs with the rxe provider, where the root has none (RDMAV_DRIVERS: the provider by path)
# (RXE_VM_BUNDLE_VERBS=1: these even where the root has its own, to try them)
if [ "${RXE_VM_BUNDLE_VERBS:-0}" = 1 ] || ! ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so >/dev/null 2>&1; then
	export LD_LIBRARY_PATH=$vm_b/guest-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	p=$(ls "$vm_b"/guest-lib/librxe-rdmav*.so)
	export RDMAV_DRIVERS=${p%-rdmav*.so}
fi
# the references (perftest, ucx_perftest) where the root lacks them
if [ -d "$vm_b/refs/bin" ]; then
	for l in "$vm_b"/refs/opt/*; do
		ldconfig -p | grep -q "/${l##*/}\$" || ln -sf "$l" "$vm_b/refs/lib/"
	done
	vl=$vm_b/refs/lib
	ls /usr/lib/x86_64-linux-gnu/libibverbs.so.1 /lib/x86_64-linux-gnu/libibverbs.so.1 >/dev/null 2>&1 ||
		vl=$vl:$vm_b/guest-lib
	for t in "$vm_b"/refs/bin/*; do
		command -v "${t##*/}" >/dev/null && continue
		printf '#!/bin/sh\nLD_LIBRARY_PATH=%s UCX_MODULE_DIR=%s/ucx exec %s "$@"\n' "$vl" "$vm_b/refs/lib" "$t" \
			>"/usr/sbin/${t##*/}" && chmod +x "/usr/sbin/${t##*/}" && echo "# ${t##*/}: the bundle's" >&2
	done
fi
EOF
echo "kernel $kver, $(du -sh "$b/vm" | cut -f1) unpacked" >&2
tar cf - -C "$b" vm | xz -6 -T2 >"$out"
ls -la "$out" >&2
