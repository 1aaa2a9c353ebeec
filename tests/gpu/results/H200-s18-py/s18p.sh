#!/bin/bash
# session 18 lead: (1) py18 A/B: main before py18 (789a2b9) vs main now; (2) pgroup vs pgroupp on main now
set -u
O=$OUT
nvidia-smi -L
OUT=$O/ab REPEAT=${REPEAT:-2} ROUNDS=${ROUNDS:-10} MAIN=.dev/py18main TREE=.dev/s18main \
  bash .dev/s18main/tests/gpu/results/H200-py18/run.sh
# (2): "main" = pgroup, "mine" = pgroupp, both on main's build
OUT=$O/pp REPEAT=${REPEAT2:-2} ROUNDS=${ROUNDS:-10} MAIN=.dev/s18main TREE=.dev/s18main \
  BUILD_MAIN=.dev/s18main/build-py18 BUILD_MINE=.dev/s18main/build-py18 POST=pgroup \
  bash -c 'sed "s/bench mine-\$op\$pass \"\$bmine\" \$a/bench mine-\$op\$pass \"\$bmine\" \${a\/pgroup\/pgroupp}/" .dev/s18main/tests/gpu/results/H200-py18/run.sh > /tmp/run2.sh; grep -n "pgroupp" /tmp/run2.sh; bash /tmp/run2.sh'
