"""The capped admission case of issue 17, run by tests/vm/lane_in_guest in the guest.

Eight commands that each touch 500 MiB, on a 4-slot pool with memory_budget="auto",
in a cgroup capped at 1.5 GiB (the caller puts this process there): admission must keep
them from being OOM-killed together, or run a killed one again, so that none is lost.
Prints one "lane-result:" line: ok/lost, and each peak with where it came from. Fails
(exit 1) when a command is lost, a peak is more than 10% off 500 MiB, or a peak is not
the cgroup's: each command runs in a cgroup of its own, whose memory.peak is its own
without a reset (sampled memory.current before 5.19), so ru_maxrss is never needed.
"""

import argparse
import os
import sys
import threading

import spawnpool

MiB = 1 << 20
COMMANDS, SLOTS, SIZE_MIB, HOLD_MS = 8, 4, 500, 1500


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--label', default='')
    label = parser.parse_args().label
    build = os.path.dirname(os.path.dirname(spawnpool.__file__))  # build/python
    alloc = os.path.join(os.path.dirname(build), 'tests', 'helpers', 'alloc_touch')
    results = [None] * COMMANDS
    warnings = []
    with spawnpool.Pool(slots=SLOTS, memory_budget='auto') as pool:
        def run(i):
            results[i] = pool.run(spawnpool.Command([alloc, str(SIZE_MIB), str(HOLD_MS)]))
        threads = [threading.Thread(target=run, args=(i,)) for i in range(COMMANDS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    ok = sum(1 for r in results if r.returncode == 0)
    peaks = ['%d MiB (%s%s)' % (r.peak_memory_bytes // MiB, r.memory_source,
                                ', OOM retry' if r.oom_retries else '') for r in results]
    off = [r for r in results if abs(r.peak_memory_bytes - SIZE_MIB * MiB) > SIZE_MIB * MiB // 10]
    from_rusage = sum(1 for r in results if r.memory_source not in ('cgroup', 'cgroup_sampled'))
    print('lane-result: %s capped admission (%d x %d MiB, %d slots, auto, cap %s): '
          '%d ok, %d lost; peaks %s' % (label, COMMANDS, SIZE_MIB, SLOTS, cap(), ok,
                                        COMMANDS - ok, ', '.join(peaks)))
    for r in results:
        if r.returncode != 0:
            print('  lost: returncode %s: %s' % (r.returncode, r.error_message))
    if from_rusage:
        print('  %d of %d peaks not from the cgroup (kernel %s)'
              % (from_rusage, COMMANDS, os.uname().release))
    if off:
        print('  %d peaks more than 10%% off %d MiB' % (len(off), SIZE_MIB))
    return 0 if ok == COMMANDS and not off and not from_rusage else 1


def cap():
    with open('/proc/self/cgroup') as f:
        path = [line.split(':', 2)[2].strip() for line in f if line.startswith('0::')][0]
    directory = '/sys/fs/cgroup' + path
    while directory != '/sys/fs/cgroup':
        try:
            with open(os.path.join(directory, 'memory.max')) as f:
                value = f.read().strip()
            if value != 'max':
                return '%d MiB' % (int(value) // MiB)
        except OSError:
            pass
        directory = os.path.dirname(directory)
    return 'none'


if __name__ == '__main__':
    sys.exit(main())
