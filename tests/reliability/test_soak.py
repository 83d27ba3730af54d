"""Short soak in the default suite: 5,000 commands through an 8-slot pool from 16
threads, in a driver process of its own (so its descriptor, thread and child counts are
the pool's alone). All results must be correct, and nothing may grow: descriptors and
threads of the driver and the spawners, their RSS (small slack), zombies. The full
100,000-command run is scripts/soak.
"""

import json
import os
import subprocess

from reliability_support import PYTHON

SOAK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "soak.py")


def test_short_soak(pids):
    proc = subprocess.Popen([PYTHON, SOAK, "--commands", "5000", "--slots", "8",
                             "--threads", "16"], stdout=subprocess.PIPE, text=True)
    pids.add(proc.pid)
    out, _ = proc.communicate(timeout=150)
    report = json.loads(out)
    assert report["problems"] == [], json.dumps(report, indent=1)
    assert proc.returncode == 0
    assert sum(report["kinds"].values()) == 5000 + report["warmup"]
    print(f"{report['commands']} commands in {report['seconds']} s "
          f"({report['commands_per_second']}/s)")
