#!/bin/bash
# tests/vm/fault.sh FAULT: from the command running on node0 of cluster.sh,
# ask the host for a fault and wait until it is done (at most 30 s).
#   kill node1   kill -9 node1's QEMU process: the node is gone at once, with
#                no FIN, no RST, nothing more on the link
#   link off     take the link between the nodes down at both ends (QEMU
#                monitor set_link): frames are dropped, both kernels run on
#   link on      bring it back
# Prints the host's answer ("FAULT: 0" when done); exit 0 when done, 1 when
# the host failed to do it or did not answer, 2 outside a cluster node0.
ctl=/run/uccl-vm/ctl
[ $# = 2 ] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
if [ "${VM_NODE:-}" != node0 ] || [ ! -d $ctl ]; then
	echo "fault.sh: not on node0 of cluster.sh" >&2
	exit 2
fi
rm -f $ctl/fault.ack
echo "$1 $2" >$ctl/fault.req.tmp && mv $ctl/fault.req.tmp $ctl/fault.req || exit 1
for _ in $(seq 300); do
	if [ -s $ctl/fault.ack ]; then
		ack=$(cat $ctl/fault.ack)
		echo "$ack"
		[ "${ack##*: }" = 0 ]
		exit
	fi
	sleep 0.1
done
echo "fault.sh: the host did not answer '$1 $2' within 30 s" >&2
exit 1
