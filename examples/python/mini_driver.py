#!/usr/bin/python3
"""A miniature build driver on spawnpool's Python API.

Compiles nothing real: it "builds" a few files with shell commands from four threads at
once, the way SCons' job threads call their spawn function, then shows the result data,
a trace file and the statistics.  Run it with the built package on the path:

    PYTHONPATH=build/python /usr/bin/python3 examples/python/mini_driver.py [OUTDIR]
"""

import os
import sys
import tempfile
import threading

import spawnpool
from spawnpool.options import Settings
from spawnpool.shell import split_simple_command
from spawnpool.stack import Session


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix='spawnpool-example-')
    os.makedirs(outdir, exist_ok=True)

    # 1. The runner interface: run(Command) blocks (with the GIL released) and returns a
    #    Result; a command that never started is a Result too, with its failure.
    with spawnpool.Pool(slots=2) as pool:
        r = pool.run(spawnpool.Command(['sh', '-c', 'echo out; echo err >&2; exit 3'],
                                       output=spawnpool.CAPTURE))
        print('run: returncode %d, stdout %r, stderr %r' % (r.returncode, r.stdout, r.stderr))
        print('     slot %d, user %.4f s, max rss %d KiB, queue wait %.3f ms'
              % (r.slot, r.user_time, r.max_rss_kb, (r.dispatched_ns - r.submitted_ns) / 1e6))
        r = pool.run(spawnpool.Command(['no-such-program-for-the-example']))
        print('not started: stage %s, errno %d: %s' % (r.failure, r.error_number,
                                                       r.error_message))
        try:            # the Popen-style form raises instead, as Popen would
            pool.run(['no-such-program-for-the-example'])
        except spawnpool.SpawnError as e:    # an OSError with a stage
            print('SpawnError: errno %d, stage %s' % (e.errno, e.stage))

    # 2. What a build driver's spawn function does: the build-feature layers (direct
    #    exec, synchronized output, a trace, statistics) from the options spec, stacked
    #    on the pool and called from many threads.
    print('split_simple_command: %r' % split_simple_command('cc -o "a b.o" -c a.c'))
    trace_path = os.path.join(outdir, 'trace.json')
    settings = Settings(output='sync', trace=trace_path, stats=True)
    session = Session(settings, slots=4, warn=print, process_name='mini_driver')
    commands = ['echo building %d > %s/file%d.txt' % (i, outdir, i) for i in range(8)]
    commands.append('cp %s/file0.txt %s/copy.txt' % (outdir, outdir))   # no shell needed
    statuses = []
    with spawnpool.Pool(slots=4) as pool:
        runner = session.start(pool)

        def job_thread(lines):
            for line in lines:
                command = spawnpool.Command(['sh', '-c', line], env=dict(os.environ))
                statuses.append(runner.run(command).returncode)
        threads = [threading.Thread(target=job_thread, args=(commands[i::4],))
                   for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    session.finish()
    print('statuses: %s' % sorted(statuses))
    print('built: %s' % sorted(os.listdir(outdir)))
    print('trace: %s' % trace_path)
    sys.stdout.write(session.stats.report(prefix='mini_driver'))
    return 0


if __name__ == '__main__':
    sys.exit(main())
