"""The systemd lane's pool probe (tests/vm/systemd/session runs it in the user's session).

A pool with memory_budget="auto" runs two commands at once on two slots, each a tree of
three processes of 40 MiB (alloc_touch), and says where the pool's cgroups came from:
  --expect systemd-scope  the pool asked the user manager for a delegated scope:
                          the driver moved from its session scope into
                          spawnpool-<pid>-<hex>.scope under user@UID.service, the slot
                          cgroups are there with the memory controller, each peak is the
                          whole tree's (about 120 MiB, from the cgroup), no warning;
  --expect given-scope    started by `systemd-run --user --scope -p Delegate=yes`: the
                          pool makes its slots in that scope, asks for none, no warning;
  --expect no-bus         no user bus: no slot cgroups, one warning that names the one
                          command, the commands still run (peaks from ru_maxrss, 40 MiB).
Prints "lane-result:" and "  check:" lines; exits 1 if a check failed.
"""

import argparse
import os
import re
import sys
import tempfile
import threading

import spawnpool

MiB = 1 << 20
SLOTS, EACH_MIB, PROCESSES, HOLD_MS = 2, 40, 3, 400
COMMAND = 'systemd-run --user --scope -p Delegate=yes'


def own_cgroup():
    with open('/proc/self/cgroup') as f:
        return [line.split(':', 2)[2].strip() for line in f if line.startswith('0::')][0]


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as e:
        return '<%s>' % e.strerror


class Checks:
    def __init__(self):
        self.failed = 0

    def __call__(self, ok, what):
        print('  check: %s: %s' % ('ok' if ok else 'FAILED', what))
        self.failed += 0 if ok else 1


def pool_tree(scope_dir):
    """The pool's directory under scope_dir (spawnpool-<pid>-<16 hex>) and its slots."""
    pid = os.getpid()
    pools = [n for n in os.listdir(scope_dir) if re.fullmatch(r'spawnpool-%d-[0-9a-f]{16}' % pid, n)]
    if len(pools) != 1:
        return None, []
    pool_dir = os.path.join(scope_dir, pools[0])
    return pool_dir, sorted(n for n in os.listdir(pool_dir) if n.startswith('slot-'))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--expect', required=True, choices=['systemd-scope', 'given-scope', 'no-bus'])
    expect = parser.parse_args().expect
    check = Checks()
    build = os.path.dirname(os.path.dirname(spawnpool.__file__))  # build/python
    alloc = os.path.join(os.path.dirname(build), 'tests', 'helpers', 'alloc_touch')
    before = own_cgroup()
    print('  cgroup before the pool: %s' % before)

    # The pool's warnings go to fd 2: caught in a file for the pool's whole life.
    caught = tempfile.TemporaryFile()
    saved = os.dup(2)
    os.dup2(caught.fileno(), 2)
    try:
        results = [None] * SLOTS
        with spawnpool.Pool(slots=SLOTS, memory_budget='auto') as pool:
            during = own_cgroup()
            scope_dir = '/sys/fs/cgroup' + os.path.dirname(during)
            pool_dir, slots = pool_tree(scope_dir)
            scope_subtree = read(os.path.join(scope_dir, 'cgroup.subtree_control'))
            pool_subtree = read(os.path.join(pool_dir, 'cgroup.subtree_control')) if pool_dir else ''
            slot_peaks = [os.path.exists(os.path.join(pool_dir, s, 'memory.peak')) for s in slots]

            def run(i):
                results[i] = pool.run(spawnpool.Command(
                    [alloc, str(EACH_MIB), str(HOLD_MS), str(PROCESSES)]))
            threads = [threading.Thread(target=run, args=(i,)) for i in range(SLOTS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        after = own_cgroup()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    caught.seek(0)
    warnings = caught.read().decode(errors='replace').strip()
    print('  cgroup with the pool: %s' % during)
    print('  cgroup after close: %s' % after)
    if warnings:
        print('  pool said: %s' % warnings)

    ok = sum(1 for r in results if r.returncode == 0)
    peaks = ', '.join('%d MiB (%s)' % (r.peak_memory_bytes // MiB, r.memory_source) for r in results)
    tree_mib = EACH_MIB * PROCESSES
    check(ok == SLOTS, '%d of %d commands ok' % (ok, SLOTS))
    if expect == 'no-bus':
        check(during == before, 'the driver stayed in its own cgroup')
        check(COMMAND in warnings and 'no systemd user bus' in warnings,
              'one warning, that says there is no user bus and names `%s`' % COMMAND)
        check(all(r.memory_source == 'rusage' for r in results),
              'peaks from ru_maxrss without slot cgroups: %s' % peaks)
    else:
        pid = os.getpid()
        scope = os.path.basename(scope_dir)
        check(not warnings, 'no warning')
        check(os.path.basename(during) == 'spawnpool-%d-driver' % pid,
              'the driver sits in its leaf spawnpool-%d-driver beside the pool' % pid)
        if expect == 'systemd-scope':
            check(re.search(r'/session-[^/]+\.scope$', before) is not None,
                  'it started in a session scope')
            check(re.fullmatch(r'spawnpool-%d-[0-9a-f]{16}\.scope' % pid, scope) is not None and
                  re.search(r'/user@%d\.service/' % os.getuid(), during) is not None,
                  'the pool got a delegated scope of its own, %s, under user@%d.service'
                  % (scope, os.getuid()))
        else:
            check(during.startswith(before + '/'), 'the pool stayed in the scope it was given')
        check(pool_dir is not None and len(slots) == SLOTS,
              'the pool made %d slot cgroups in the scope: %s' % (len(slots), ', '.join(slots)))
        if pool_dir:
            check('memory' in scope_subtree.split() and 'memory' in pool_subtree.split() and
                  slot_peaks and all(slot_peaks),
                  'the memory controller reaches the slots (subtree_control of the scope: %s, '
                  'of the pool: %s; each slot has memory.peak)' % (scope_subtree, pool_subtree))
            check(not os.path.exists(pool_dir), 'the pool removed its cgroups at close')
        check(all(r.memory_source == 'cgroup' and
                  abs(r.peak_memory_bytes - tree_mib * MiB) <= tree_mib * MiB // 10 for r in results),
              'each peak is the whole tree\'s (%d MiB), from the slot cgroup: %s' % (tree_mib, peaks))
        check(after == os.path.dirname(during), 'the driver went back to the scope at close')
    print('lane-result: probe %s: %s (%d checks failed)'
          % (expect, 'passed' if not check.failed else 'FAILED', check.failed))
    return 1 if check.failed else 0


if __name__ == '__main__':
    sys.exit(main())
