"""For callers that expect subprocess.Popen: a runner behind Popen's interface.

`call(runner, argv, env, stdout, stderr)` does what ``Popen(argv, env=env,
stdout=stdout, stderr=stderr).wait()`` does, on any runner: the command's output goes
where Popen's child would have written it, and where Popen would have raised (the
program could not be executed, its arguments are too big for exec) it raises the same
OSError (SpawnError, from `spawn_error()`).  Other failures (the spawner died, the pool
was closed), which Popen has no word for, come back as the Result.  The SCons plugin's
PSPAWN is one such caller (SCons hands it Configure's config.log stream).

Stateless: safe from any thread.
"""

import errno

from .command import CAPTURE, CAPTURE_MERGED, PASSTHROUGH, Command, spawn_error
from .output_sync import write_all

__all__ = ['call', 'popen_would_raise', 'write_to_stream']


def call(runner, argv, env=None, stdout=None, stderr=None):
    """The Result of running argv as Popen would with these streams (see above)."""
    merge = stdout is stderr and stdout is not None
    output = (PASSTHROUGH if stdout is None and stderr is None
              else CAPTURE_MERGED if merge else CAPTURE)
    command = Command(argv, env, None, output)
    result = runner.run(command)
    if result.failure is not None:
        if popen_would_raise(result):
            raise spawn_error(command, result)
        return result
    if output != PASSTHROUGH:
        write_to_stream(result.stdout, stdout, 1)
        if not merge:
            write_to_stream(result.stderr, stderr, 2)
    return result


def popen_would_raise(result):
    """Whether Popen would have raised for a command with this failure: the program
    could not be executed, or its arguments were too big for exec."""
    return result.failure == 'exec' or (result.failure == 'request'
                                        and result.error_number == errno.E2BIG)


def write_to_stream(data, stream, default_fd):
    """Write captured bytes where Popen(stdout=stream) would have had the command write
    them: `stream` None (fd `default_fd`), an fd, DEVNULL/PIPE (dropped: nobody reads
    them), or a file object (flushed first, then its fd; one without a fd gets text)."""
    if not data:
        return
    if stream is None:
        fd = default_fd
    elif isinstance(stream, int):
        if stream < 0:
            return
        fd = stream
    else:
        try:
            stream.flush()      # Popen's child writes after what the stream had flushed
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            stream.write(data.decode(getattr(stream, 'encoding', None) or 'utf-8', 'replace'))
            return
    write_all(fd, data)
