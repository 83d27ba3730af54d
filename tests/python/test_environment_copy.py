"""A command without an environment (env=None) gets the driver's, copied while the GIL
is held: another Python thread changing os.environ at the same time (putenv, under the
GIL) cannot change environ under the copy. Copied after the GIL was released, the copy
read an array that putenv was reallocating: the driver crashed (SIGSEGV) within seconds
here. Checked in a separate driver process, with a large environment (the copy then
takes long enough to meet a putenv) and a thread adding and removing variables
throughout; every command must see every variable of the base set, intact."""

import os
import subprocess
import sys

DRIVER = r"""
import os, threading
import spawnpool
from spawnpool import Command

BASE = 20000
for i in range(BASE):
    os.environ["SPAWNPOOL_BASE_%d" % i] = str(i)
stop = False

def churn():
    added = 0
    while not stop:
        os.environ["SPAWNPOOL_CHURN_%d" % added] = "x" * (added % 64)
        added += 1
        if added % 2000 == 0:
            for j in range(added - 2000, added):
                del os.environ["SPAWNPOOL_CHURN_%d" % j]

bad = 0
with spawnpool.Pool(slots=2) as pool:
    thread = threading.Thread(target=churn)
    thread.start()
    try:
        for _ in range(200):
            r = pool.run(Command(["/usr/bin/env", "-0"], env=None, output="capture"))
            entries = r.stdout.split(b"\0")[:-1]
            env = dict(e.split(b"=", 1) for e in entries if b"=" in e)
            intact = all(env.get(("SPAWNPOOL_BASE_%d" % i).encode()) == str(i).encode()
                         for i in range(BASE))
            if r.returncode != 0 or not intact or len(entries) != len(set(entries)):
                bad += 1
    finally:
        stop = True
        thread.join()
print("bad", bad)
"""


def test_env_none_is_copied_under_the_gil_while_another_thread_changes_it():
    driver = subprocess.run([sys.executable, "-c", DRIVER], capture_output=True, text=True,
                            timeout=600, env=dict(os.environ))
    assert driver.returncode == 0, f"driver ended with {driver.returncode}: {driver.stderr}"
    assert driver.stdout.strip() == "bad 0"
