"""Protocol robustness with live processes (the fuzz targets in tests/fuzz cover the
decoders alone).

The engine validates a request before writing it, so corrupt requests cannot come through
the Python API: tests/reliability/protocol_corruption_test.cc writes them straight into a
real spawner's slot (through the engine's internal Segment), and also puts a lying fake
spawner behind spawnpool::Pool. This file runs that program from the build tree the
imported package belongs to; ctest runs it too (reliability.protocol_corruption).
"""

import os
import subprocess

import pytest

from reliability_support import build_dir, children_of

TEST = os.path.join(build_dir(), "tests", "reliability", "protocol_corruption_test")
LIAR = os.path.join(build_dir(), "tests", "reliability", "lying_spawner")
SPAWNER = os.path.join(build_dir(), "spawnpool-spawner")


def test_corrupt_requests_are_refused_and_lying_spawners_distrusted(pids):
    if not (os.path.exists(TEST) and os.path.exists(LIAR)):
        pytest.skip(f"{TEST} is not built (configure with -DSPAWNPOOL_BUILD_TESTS=ON)")
    before = set(children_of(os.getpid()))
    proc = subprocess.Popen([TEST, SPAWNER, LIAR], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    pids.add(proc.pid)
    try:
        out, _ = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert "mutated requests" in out and "all checks passed" in out, out
    # Everything it started was reaped by it: nothing was re-parented to us.
    assert set(children_of(os.getpid())) <= before
