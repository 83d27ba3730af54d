#!/usr/bin/python3
"""Measures what direct exec saves per command: the median time of one command through
the pool, started through ``sh -c`` and directly, over RUNS runs each (interleaved, so
drift in the machine's load hits both alike).  Every case passes the environment
explicitly, as SCons does (its ENV), so each pays the same conversion.

    PYTHONPATH=build/python /usr/bin/python3 tests/cli/measure_direct_exec.py [RUNS]
"""

import os
import statistics
import sys
import time

import spawnpool
from spawnpool.direct_exec import DirectExec

CASES = [
    ('pool.run([sh, -c, true])  (builtin: one exec)', False, ['sh', '-c', 'true']),
    ('pool.run([sh, -c, /bin/true])  (sh, then true)', False, ['sh', '-c', '/bin/true']),
    ('direct exec off: sh -c /bin/true', False, ['sh', '-c', '/bin/true']),
    ('direct exec on:  sh -c /bin/true', True, ['sh', '-c', '/bin/true']),
    ('pool.run([/bin/true])', None, ['/bin/true']),
]


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    times = {name: [] for name, _, _ in CASES}
    env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'), 'HOME': os.environ.get('HOME', '/')}
    cwd = os.getcwd()
    with spawnpool.Pool(slots=1) as pool:
        runners = {True: DirectExec(pool), False: pool}
        for _ in range(20):                         # warm up the spawner and caches
            pool.run(spawnpool.Command(['/bin/true'], env, cwd))
        for _ in range(runs):
            for i, (name, direct, argv) in enumerate(CASES):
                start = time.perf_counter()
                runner = pool if i < 2 or direct is None else runners[direct]
                runner.run(spawnpool.Command(argv, env, cwd))
                times[name].append(time.perf_counter() - start)
    for name, _, _ in CASES:
        print('%-50s median %.3f ms' % (name, statistics.median(times[name]) * 1e3))
    off = statistics.median(times[CASES[2][0]])
    on = statistics.median(times[CASES[3][0]])
    print('direct exec saves %.3f ms per command (%.0f%%), median of %d runs'
          % ((off - on) * 1e3, 100 * (off - on) / off, runs))


if __name__ == '__main__':
    main()
