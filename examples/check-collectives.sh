#!/bin/sh
# make check: the collective examples, each on 3 ranks (odd on purpose) and 4,
# host memory, small sizes; a wrong element fails the example itself.
set -e
d=$(dirname "$0")
for n in 3 4; do
    "$d/run-np.sh" $n examples/allgather 1
    "$d/run-np.sh" $n examples/moe_alltoallv 1500
    "$d/run-np.sh" $n examples/weight_bcast 8
done
