#!/bin/bash
# tests/vm/agent.sh HOST CMD...: run CMD on HOST, another VM of cluster.sh,
# through its dropbear with the cluster's key. It is mpirun's launch agent
# there (OMPI_MCA_plm_rsh_agent, as ssh elsewhere), and carries what the
# ranks need from the caller's environment: PATH, LD_LIBRARY_PATH, UCCL_*,
# UCX_* and the sanitizers' *SAN_OPTIONS (the node's own RXE_* come from its
# /run/uccl-vm/env). Only meaningful inside a cluster VM.
[ $# -ge 2 ] || { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
host=$1
shift
fwd=$(export -p | grep -E '^declare -x (PATH|LD_LIBRARY_PATH|UCCL_[A-Za-z0-9_]*|UCX_[A-Z0-9_]*|[A-Z]*SAN_OPTIONS)=')
exec dbclient -q -y -y -i /run/uccl-vm/id "root@$host" ". /run/uccl-vm/env
$fwd
$*"
