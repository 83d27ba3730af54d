"""Running ``sh -c LINE`` as the program it names, with what the shell would add.

`DirectExec` is the layer (stack.py) that does it on its inner runner.  Skipping the
shell saves one exec per command.  For the result to be the shell's, three
things the shell does besides exec'ing the program are reproduced here:

- The environment: dash exports ``PWD`` (kept from the environment if it names the
  working directory, else the physical cwd).  `shell_env()` does the same.  Variable
  order in the environment block can differ; no program that looks variables up by name
  can tell.
- A program that cannot start (failure stage "exec"): the line is run again through sh,
  which prints its own message ("sh: 1: foo: not found") and exits 126/127; nothing ran
  the first time.  Other failures come back as they are (a spawner that died may have
  run the command: never run it twice).
- A program killed by a signal N: dash (which does not exec the last command of ``-c``)
  exits 128+N and prints strsignal(N) ("Segmentation fault"), except for SIGINT and
  SIGPIPE.  `sh_status()` maps the status the same way.  SIGINT, SIGTERM, SIGHUP and SIGQUIT
  are the exception: those normally reach the command's whole process group (Ctrl-C, a
  cancel), shell included, and then sh dies of the signal too (-N, no message); so they
  are passed on as -N.  The message goes where the command's stderr goes: to fd 2, or
  into the captured output.  Not reproduced: dash's " (core dumped)" suffix, which needs a
  status bit the pool does not report (core dumps are off by default: RLIMIT_CORE 0).

Verified against dash, Debian's /bin/sh (tests/cli/test_direct_exec.py).  Only ``sh`` and
``dash`` command lines are taken: another shell's conventions differ (bash execs the last
command; zsh expands differently).

Stateless apart from tables built at import: safe from any thread.  Kept lean: it is
on every command's path by default.
"""

import functools
import os
import signal

from .command import CAPTURE_MERGED, PASSTHROUGH, Command
from .output_sync import write_all
from .shell import split_simple_command

__all__ = ['DirectExec', 'direct_argv', 'shell_env', 'sh_status']

_SHELLS = frozenset(('sh', 'dash', '/bin/sh', '/usr/bin/sh', '/bin/dash', '/usr/bin/dash'))

# Signals that normally hit the whole process group, the shell included: pass as -N.
_GROUP_SIGNALS = frozenset((signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT))
# dash says nothing for these when the child dies of them.
_SILENT_SIGNALS = frozenset((signal.SIGINT, signal.SIGPIPE))


def _status_table():
    table = {}
    for n in range(1, signal.NSIG):
        if n in _GROUP_SIGNALS:
            continue
        text = signal.strsignal(n) if n not in _SILENT_SIGNALS else None
        table[-n] = (128 + n, (text + '\n').encode() if text else None)
    return table


_SH_STATUS = _status_table()


class DirectExec:
    """The layer: ``[sh, '-c', line]`` with a simple line runs as the line's program."""

    def __init__(self, inner):
        self.inner = inner

    def run(self, command):
        words = direct_argv(command.argv)
        cwd = command.cwd
        if words is not None and cwd.__class__ is str:     # PWD is a str
            env = command.environment
            if 'PATH' in env or '/' in words[0]:   # dash's default PATH is not execvp's
                output = command.output
                result = self.inner.run(Command(words, shell_env(env, cwd), cwd, output,
                                                command.local))
                if result.failure != 'exec':
                    if result.failure is None and result.returncode < 0:
                        _as_sh_would(result, output)
                    return result
        return self.inner.run(command)


def _as_sh_would(result, output):
    """A program killed by a signal: the status and message sh would have given."""
    status, message = sh_status(result.returncode)
    result.returncode = status
    if message is None:
        return
    if output == PASSTHROUGH:
        write_all(2, message)
    elif output == CAPTURE_MERGED:
        result.stdout = (result.stdout or b'') + message
    else:
        result.stderr = (result.stderr or b'') + message


def direct_argv(argv):
    """The program's argv if ``argv`` is ``[sh, '-c', line]`` with a simple line, else None."""
    if len(argv) != 3 or argv[1] != '-c' or argv[0] not in _SHELLS:
        return None
    return split_simple_command(argv[2])


def shell_env(env, cwd):
    """`env` with PWD as dash would export it to a command run in `cwd` (absolute)."""
    pwd = env.get('PWD')
    if pwd == cwd:
        return env
    if pwd and pwd[0] == '/' and _same_file(pwd, cwd):
        return env              # a logical path to the same directory: dash keeps it
    env = dict(env)
    env['PWD'] = _physical(cwd)   # dash's getcwd(): no symlinks
    return env


# A build runs in a handful of directories: resolve each once.
_physical = functools.lru_cache(maxsize=64)(os.path.realpath)


def _same_file(a, b):
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return sa.st_ino == sb.st_ino and sa.st_dev == sb.st_dev


def sh_status(returncode):
    """(status sh would have returned, message sh would have printed or None)."""
    if returncode >= 0:
        return returncode, None
    return _SH_STATUS.get(returncode, (returncode, None))
