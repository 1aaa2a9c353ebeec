# Sourced by tests/rxe/check.sh and check-gpu.sh: outside the Soft-RoCE VM
# ($RXE_DEV unset), run the calling script again inside it (RXE_VM, default
# the source tree's sibling ../shared/rxe-vm) from the build directory.
# Needs $builddir and $top_srcdir set by the caller.
# rxe_reexec SCRIPT DEFAULT_TIMEOUT [VAR=VALUE...]: returns only inside the VM.
rxe_reexec() {
	[ -n "${RXE_DEV:-}" ] && return 0
	local script=$1 timeout=$2 vmdir=${RXE_VM:-$top_srcdir/../shared/rxe-vm}
	shift 2
	if [ ! -x "$vmdir/run-in-rxe-vm.sh" ]; then
		echo "FAIL: the Soft-RoCE VM script $vmdir/run-in-rxe-vm.sh is missing (set RXE_VM)"
		echo "0 passed, 1 failed, 0 skipped"
		exit 1
	fi
	cd "$builddir" && exec env top_builddir="$builddir" "$@" \
		RXE_VM_TIMEOUT="${RXE_VM_TIMEOUT:-$timeout}" "$vmdir/run-in-rxe-vm.sh" "$script"
}
