#!/bin/bash
# tests/vm/selftest.sh: proves that the Soft-RoCE VM of tests/vm/run.sh
# carries real verbs traffic between its two devices (rxe0 -> rxe1), with
# rdma-core's and perftest's own tools (packages ibverbs-utils, perftest).
# Run from anywhere. Exit 0 = all passed; 77 = the VM cannot boot here.
here=$(dirname "$(readlink -f "$0")")
if [ -z "${RXE_DEV:-}" ]; then # on the host: re-run inside the VM
	why=$("$here/run.sh" --check) || { echo "$why"; exit 77; }
	cd "$here" && exec "$here/run.sh" "$here/selftest.sh"
fi

pass=0 fail=0
check() { # check NAME CMD...: run CMD, count it
	if "${@:2}" >/tmp/selftest.out 2>&1; then
		pass=$((pass + 1)); echo "ok   $1"
	else
		fail=$((fail + 1)); echo "FAIL $1"; tail -5 /tmp/selftest.out | sed 's/^/     /'
	fi
}
pair() { # pair SERVER_CMD... -- CLIENT_CMD...: server on rxe1, client on rxe0
	local s=() c=() rc src spid n=0
	while [ "$1" != -- ]; do s+=("$1"); shift; done
	shift; c=("$@")
	timeout 120 "${s[@]}" >/tmp/selftest.srv 2>&1 &
	spid=$!
	# the client connects once: wait until the server listens on TCP port
	# 18515 (with rdma_cm, -R, it listens on no TCP port: wait 3 s)
	case " ${s[*]} " in *" -R "*) n=54 ;; esac
	until ss -ltn | grep -q ':18515 ' || [ $n -ge 60 ]; do sleep 0.5; n=$((n + 1)); done
	timeout 120 "${c[@]}"; rc=$?
	wait $spid; src=$?
	if [ $rc != 0 ] || [ $src != 0 ]; then cat /tmp/selftest.srv; return 1; fi
}
g=$RXE_GID_INDEX
: "${RXE_DEV2:?}" # set by run.sh
check "ibv_devinfo lists $RXE_DEV and $RXE_DEV2 ACTIVE" \
	bash -c "[ \$(ibv_devinfo | grep -c PORT_ACTIVE) = 2 ]"
for t in rc uc; do
	check "ibv_${t}_pingpong $RXE_DEV -> $RXE_DEV2" pair ibv_${t}_pingpong -d "$RXE_DEV2" -g "$g" -n 100 -- \
		ibv_${t}_pingpong -d "$RXE_DEV" -g "$g" -n 100 127.0.0.1
done
check "ibv_ud_pingpong $RXE_DEV -> $RXE_DEV2" pair ibv_ud_pingpong -d "$RXE_DEV2" -g "$g" -n 100 -s 1024 -- \
	ibv_ud_pingpong -d "$RXE_DEV" -g "$g" -n 100 -s 1024 127.0.0.1
for t in write read send; do
	check "ib_${t}_bw 64 KiB $RXE_DEV -> $RXE_DEV2" \
		pair "ib_${t}_bw" -d "$RXE_DEV2" -x "$g" -s 65536 -n 200 -F -- \
		"ib_${t}_bw" -d "$RXE_DEV" -x "$g" -s 65536 -n 200 -F 127.0.0.1
	grep -E '^ +65536' /tmp/selftest.out | sed "s/^/     ib_${t}_bw: /"
done
check "ib_write_bw over rdma_cm (-R) $RXE_IP -> $RXE_IP2" \
	pair ib_write_bw -d "$RXE_DEV2" -R -s 65536 -n 200 -F -- ib_write_bw -d "$RXE_DEV" -R -s 65536 -n 200 -F "$RXE_IP2"
echo "$pass passed, $fail failed"
[ $fail = 0 ]
