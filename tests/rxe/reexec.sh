# shellcheck shell=bash
# Sourced by the tests/rxe scripts (check*.sh, bench*.sh): outside the Soft-RoCE VM
# ($RXE_DEV unset), run the calling script again inside it (the project's
# runner, tests/vm/run.sh) from the build directory, sharing the source tree
# too (it may lie under /tmp, which is the guest's own tmpfs). When this
# machine cannot boot the VM, return with RXE_SKIP set to the reason, so
# that the caller reports each case as skipped. Needs $builddir and
# $top_srcdir set by the caller.
# rxe_reexec SCRIPT DEFAULT_TIMEOUT [VAR=VALUE...]: returns only inside the
# VM, or on the host with RXE_SKIP set.
# shellcheck disable=SC2154 # builddir and top_srcdir: set by the caller
rxe_reexec() {
	[ -n "${RXE_DEV:-}" ] && return 0
	local script=$1 timeout=$2 runner=$top_srcdir/tests/vm/run.sh why
	shift 2
	if ! why=$("$runner" --check); then
		RXE_SKIP="$(echo "$why" | paste -sd ' ')"
		export RXE_DEV=rxe0 RXE_DEV2=rxe1
		echo "note: $RXE_SKIP"
		return 0
	fi
	cd "$builddir" && exec env top_builddir="$builddir" "$@" \
		RXE_VM_SHARE="$top_srcdir${RXE_VM_SHARE:+:$RXE_VM_SHARE}" \
		RXE_VM_TIMEOUT="${RXE_VM_TIMEOUT:-$timeout}" "$runner" "$script"
}

# rxe_case_skipped NAME: on the host without the VM, report case NAME as
# skipped (with the reason) and return 0; inside the VM return 1.
rxe_case_skipped() {
	[ -n "${RXE_SKIP:-}" ] || return 1
	skip=$((skip + 1))
	echo "SKIP $1: no Soft-RoCE VM here"
}
