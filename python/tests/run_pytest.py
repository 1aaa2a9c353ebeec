"""Run the binding's tests on this MPI rank (started by check-pytest.sh under
mpirun). pytest's exit 5 (no tests collected), or no test passing at all,
is a failure here, never a pass."""
import os
import sys

import pytest


class Count:
    passed = 0

    def pytest_runtest_logreport(self, report):
        if report.when == "call" and report.passed:
            self.passed += 1


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    count = Count()
    # arguments: test files (default: every test here), then pytest options
    files = [a for a in sys.argv[1:] if a.endswith(".py")]
    opts = [a for a in sys.argv[1:] if not a.endswith(".py")]
    paths = [os.path.join(here, f) for f in files] or [here]
    rc = pytest.main(["-q", "-p", "no:cacheprovider", "--color=no", "--rootdir", here] + paths +
                     opts, plugins=[count])
    if rc == pytest.ExitCode.NO_TESTS_COLLECTED or count.passed == 0:
        print("FAIL: no test ran (pytest exit %d)" % rc)
        rc = 1
    sys.exit(int(rc))


if __name__ == "__main__":
    main()
