"""TraceWriter and Stats on synthetic results (spawnpool.Result, as any runner returns
it): the file is valid JSON after every event, also with many writer threads; the
statistics add up."""

import json
import os
import threading
import pytest

from cli_support import needs_module, spawnpool

pytestmark = needs_module

MS = 1000000


def result(slot, submitted, dispatched, started, exited, completed, **kw):
    fields = dict(slot=slot, submitted_ns=submitted, dispatched_ns=dispatched,
                  started_ns=started, exited_ns=exited, completed_ns=completed,
                  user_time=0.5, system_time=0.25, max_rss_kb=1234, returncode=0)
    fields.update(kw)
    return spawnpool.Result(**fields)


def unstarted(when, message='No such file'):
    return spawnpool.Result(failure='exec', error_number=2, error_message=message,
                            completed_ns=when)


def events(path, ph='X'):
    return [e for e in json.loads(path.read_text())['traceEvents'] if e['ph'] == ph]


def test_trace_is_valid_after_every_event(tmp_path):
    path = tmp_path / 't.json'
    trace = spawnpool.TraceWriter(path)
    assert events(path) == []
    base = trace._origin_ns
    for i in range(5):
        trace.add(result(i % 2, base, base + MS, base + 2 * MS, base + 12 * MS, base + 13 * MS,
                         returncode=i), 'cc -c "f%d.c" \\ \u00e9' % i)
        got = events(path)
        assert len(got) == i + 1
        assert got[-1]['args']['command'] == 'cc -c "f%d.c" \\ \u00e9' % i
    e = got[0]
    assert (e['tid'], e['ts'], e['dur']) == (0, 2000.0, 10000.0)
    assert e['args'] == {'command': 'cc -c "f0.c" \\ \u00e9', 'returncode': 0,
                         'user_time_s': 0.5, 'system_time_s': 0.25, 'max_rss_kb': 1234,
                         'queue_wait_ms': 1.0, 'pool_overhead_ms': 2.0}
    trace.add(unstarted(base + 20 * MS), 'nope')
    instant = events(path, 'i')[0]
    assert instant['args'] == {'command': 'nope', 'error': 'No such file', 'stage': 'exec'}
    assert instant['ts'] == 20000.0
    names = [e['args']['name'] for e in events(path, 'M')]
    assert names == ['spawnpool', 'slot 0', 'slot 1']
    trace.close()
    trace.close()
    assert len(events(path)) == 5


def test_trace_from_many_threads(tmp_path):
    path = tmp_path / 't.json'
    trace = spawnpool.TraceWriter(path)

    def writer(slot):
        for i in range(200):
            trace.add(result(slot, 0, 1, 2, 3, 4), 'cmd %d %d' % (slot, i))
    threads = [threading.Thread(target=writer, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    trace.close()
    assert len(events(path)) == 1600


def test_trace_write_error_stops_tracing(tmp_path, capsys):
    trace = spawnpool.TraceWriter(tmp_path / 't.json')
    full = os.open('/dev/full', os.O_WRONLY)
    os.dup2(full, trace._fd)                        # from now on: ENOSPC
    os.close(full)
    trace.add(result(0, 0, 1, 2, 3, 4), 'x')     # no exception: the build goes on
    trace.add(result(0, 0, 1, 2, 3, 4), 'x')
    trace.close()
    err = capsys.readouterr().err
    assert err.count('tracing stopped') == 1, err
    with pytest.raises(OSError):                    # unwritable from the start: say so
        spawnpool.TraceWriter('/dev/full')


def test_stats_add_up():
    stats = spawnpool.Stats(slots=2)
    # Two slots busy for 100 ms each over a 100 ms build, one 10 ms command failing.
    stats.add(result(0, 0, 0, 1 * MS, 61 * MS, 62 * MS), 'long')
    stats.add(result(1, 0, 2 * MS, 3 * MS, 13 * MS, 14 * MS, returncode=1), 'short')
    stats.add(result(1, 14 * MS, 14 * MS, 15 * MS, 45 * MS, 100 * MS), 'mid')
    stats.add(unstarted(50 * MS, 'x'), 'missing')
    assert (stats.commands, stats.failed, stats.unstarted) == (4, 2, 1)
    assert stats.command_ns == 100 * MS
    assert stats.queue_ns == 2 * MS
    assert stats.overhead_ns == (1 + 1) * MS + (1 + 1) * MS + (1 + 55) * MS
    assert stats.build_wall() == 0.1
    assert abs(stats.utilization() - 0.5) < 1e-9
    assert [c for _, c in stats.longest()] == ['long', 'mid', 'short']
    text = stats.report(prefix='x')
    assert 'commands:           4 run, 2 failed (1 did not start)' in text
    assert 'command time:       total 0.100 s, mean 33.333 ms' in text
    assert 'slot utilization:   50.0% (2 slots' in text
    stats.note_slots(1)
    assert stats.slots == 2


def test_stats_keep_the_ten_longest():
    stats = spawnpool.Stats(slots=1)
    for i in range(100):
        stats.add(result(0, 0, 0, 0, i * MS, i * MS), 'c%d' % i)
    assert [c for _, c in stats.longest()] == ['c%d' % i for i in range(99, 89, -1)]
    assert spawnpool.Stats().report().count('\n') == 6     # empty: no crash, no list
