"""The SCons PR #3719 design, minimal and benchmark-only: a Python spawner process.

The driver starts one of these per job thread (with subprocess.Popen, so it is a fresh
interpreter, not a fork of the big driver) and talks to it over pipes: it pickles
(argv, env, cwd) to the spawner's stdin; the spawner runs subprocess.Popen(...).wait()
and pickles the return code back on its stdout. As in the PR, a command's exception
(it could not start) is pickled back and re-raised in the driver.

Two of the PR's gaps are closed because they would break the benchmark, not its speed:
the command's stdout is the driver's stdout (passed as fd SPAWNPOOL_BENCH_OUT_FD), not
the IPC pipe, and cwd is sent. Everything else is as the PR had it: close_fds=True
Popen (the vfork path on Python >= 3.10), one round trip per command.

Driver side: PickleSpawner below. Spawner side: `python3 pickle_spawner.py OUT_FD`.
"""

import os
import pickle
import subprocess
import sys


class PickleSpawner:
    """The driver's handle on one spawner process; use from one thread at a time."""

    def __init__(self, out_fd=1):
        # The spawner receives its own duplicate of the driver's stdout (pass_fds keeps
        # the fd number), to give commands as their stdout.
        dup = os.dup(out_fd)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), str(dup)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=(dup,),
                close_fds=True)
        finally:
            os.close(dup)
        self.pid = self.proc.pid

    def run(self, argv, env=None, cwd=None):
        pickle.dump((argv, env, cwd), self.proc.stdin)
        self.proc.stdin.flush()
        kind, value = pickle.load(self.proc.stdout)
        if kind == "error":
            raise value
        return value

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()
        self.proc.stdout.close()


def serve(out_fd):
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    # Commands get /dev/null as stdin and the driver's stdout, never the IPC pipes.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(out_fd, 1)
    os.close(out_fd)
    for fd in (requests.fileno(), replies.fileno()):
        os.set_inheritable(fd, False)
    while True:
        try:
            argv, env, cwd = pickle.load(requests)
        except EOFError:
            return
        try:
            reply = ("rc", subprocess.Popen(argv, env=env, cwd=cwd, close_fds=True).wait())
        except Exception as e:  # the PR pipes exceptions back to the driver
            reply = ("error", e)
        pickle.dump(reply, replies)
        replies.flush()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
