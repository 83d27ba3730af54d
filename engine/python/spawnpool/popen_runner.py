"""The stock runner: `PopenRunner.run(command) -> Result` with subprocess.Popen.

It spawns the way stock SCons does (``Popen(argv, env=env, close_fds=True)``: the
caller's stdin and process group, the driver forked or vforked by CPython), so a front
end can keep its build-feature layers when the pool cannot start.  Results carry what
``wait4`` tells (status, rusage) and CLOCK_MONOTONIC times taken around the spawn;
`slot` is -1.  A program that cannot start is a Result with its failure, as from the
pool: ``exec`` (``chdir`` when the cwd was the problem), ``request`` for arguments too
big for exec or a NUL byte.

It has no admission: no slots, local slots or make's jobserver (those are the pool's
scheduler's, docs/architecture.md "One admission point").  `interrupt(sig)` is the
runner interface's, as Pool.interrupt: commands not started yet come back with
returncode -sig.

Thread-safe: run() is called from many threads; nothing is shared between calls but the
signal interrupt() set once.
"""

import errno
import os
import selectors
import subprocess
import time

from .command import CAPTURE, CAPTURE_MERGED, PASSTHROUGH, Result

__all__ = ['PopenRunner']

_now = time.monotonic_ns
_CHUNK = 1 << 16


class PopenRunner:
    """Runs each command with subprocess.Popen and waits for it."""

    _interrupted = 0        # the signal interrupt() was given (the first stays); 0: none

    def interrupt(self, sig):
        """As Pool.interrupt: later commands are not started and return -sig."""
        self._interrupted = self._interrupted or sig

    def run(self, command):
        if self._interrupted:
            return Result(returncode=-self._interrupted)
        submitted = _now()
        output = command.output
        stdout = None if output == PASSTHROUGH else subprocess.PIPE
        stderr = (subprocess.STDOUT if output == CAPTURE_MERGED
                  else subprocess.PIPE if output == CAPTURE else None)
        try:
            proc = subprocess.Popen(command.argv, env=command.env, cwd=command.cwd,
                                    close_fds=True, stdout=stdout, stderr=stderr)
        except OSError as e:
            return _not_started(command, e.errno or errno.EINVAL, e.strerror or str(e),
                                'chdir' if e.filename == command.cwd else 'exec', submitted)
        except ValueError as e:     # an embedded NUL byte
            return _not_started(command, errno.EINVAL, str(e), 'request', submitted)
        started = _now()
        out, err = _drain(proc) if output != PASSTHROUGH else (None, None)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = _exit_code(status)        # reaped: Popen must not wait again
        exited = _now()
        return Result(returncode=proc.returncode, stdout=out,
                      stderr=err if output == CAPTURE else None,
                      user_time=usage.ru_utime, system_time=usage.ru_stime,
                      wall_time=(exited - started) / 1e9, max_rss_kb=usage.ru_maxrss,
                      submitted_ns=submitted, dispatched_ns=submitted, started_ns=started,
                      exited_ns=exited, completed_ns=_now())


def _not_started(command, number, text, stage, when):
    if number == errno.E2BIG:
        stage = 'request'
    what = ("cannot enter working directory '%s'" % os.fsdecode(command.cwd)
            if stage == 'chdir' else "cannot execute '%s'" % os.fsdecode(command.argv[0]))
    return Result(failure=stage, error_number=number, error_message='%s: %s' % (what, text),
                  submitted_ns=when, completed_ns=_now())


def _drain(proc):
    """(stdout bytes, stderr bytes or None), read until both pipes are at EOF."""
    chunks = {}
    with selectors.DefaultSelector() as selector:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                chunks[pipe] = []
                selector.register(pipe, selectors.EVENT_READ)
        while selector.get_map():
            for key, _ in selector.select():
                data = os.read(key.fd, _CHUNK)
                if data:
                    chunks[key.fileobj].append(data)
                else:
                    selector.unregister(key.fileobj)
                    key.fileobj.close()
    out = b''.join(chunks[proc.stdout])
    return out, b''.join(chunks[proc.stderr]) if proc.stderr in chunks else None


def _exit_code(status):
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)
