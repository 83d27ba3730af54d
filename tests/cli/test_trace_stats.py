"""The engine's TraceWriter and Stats (trace.py, stats.py) on synthetic results
(spawnpool.Result, as any runner returns it): the file is valid JSON after every event,
also with many writer threads; the statistics add up."""

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
    base = trace.origin_ns
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


def test_trace_write_error_stops_tracing(tmp_path, capfd):
    trace = spawnpool.TraceWriter(tmp_path / 't.json')
    full = os.open('/dev/full', os.O_WRONLY)
    os.dup2(full, trace.fd)                        # from now on: ENOSPC
    os.close(full)
    trace.add(result(0, 0, 1, 2, 3, 4), 'x')     # no exception: the build goes on
    trace.add(result(0, 0, 1, 2, 3, 4), 'x')
    trace.close()
    err = capfd.readouterr().err       # the engine's console: fd 2, or output_sync.py's
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


# --- memory admission's figures ---------------------------------------------------------

MIB = 1 << 20


def test_stats_memory_lines():
    stats = spawnpool.Stats(slots=2)
    stats.add(result(0, 0, 0, 0, MS, MS), 'no admission')
    assert 'delayed for memory' not in stats.report()      # memory off: no memory lines
    peaks = [(100, 100), (100, 110), (200, 100), (50, 100)]  # (predicted, measured) MiB
    for i, (predicted, measured) in enumerate(peaks):
        stats.add(result(0, 0, 0, 0, MS, MS, predicted_peak_bytes=predicted * MIB,
                         peak_memory_bytes=measured * MIB, memory_source='cgroup',
                         memory_wait_ns=(i == 1) * 40 * MS), 'c%d' % i)
    stats.add(result(1, 0, 0, 0, MS, MS, returncode=-9, predicted_peak_bytes=300 * MIB,
                     peak_memory_bytes=600 * MIB, memory_source='cgroup', oom_killed=True,
                     oom_retries=1, memory_wait_ns=10 * MS), 'oom')
    # Errors: 0%, 9%, 100%, 50%, 50%: p50 50%, p90 100%.
    assert (stats.prediction_error(0.5), stats.prediction_error(0.9)) == (50, 100)
    text = stats.report()
    assert 'delayed for memory: 2 commands, 0.050 s in all' in text
    assert 'OOM retries:        1 (1 killed again when run alone)' in text
    assert ('prediction error:   p50 50%, p90 100% of the measured peak (5 commands, '
            '3 under-predicted)') in text


def test_trace_memory_counter_and_oom_retry(tmp_path):
    path = tmp_path / 't.json'
    trace = spawnpool.TraceWriter(path)
    trace.add(result(0, 0, 0, MS, 2 * MS, 3 * MS), 'plain')
    trace.add(result(1, 0, 5 * MS, 6 * MS, 9 * MS, 10 * MS, predicted_peak_bytes=64 * MIB,
                     peak_memory_bytes=80 * MIB, memory_source='cgroup', oom_retries=1,
                     predicted_in_use_bytes=192 * MIB, measured_in_use_bytes=150 * MIB),
              'retried')
    trace.close()
    plain, retried = events(path)
    assert 'peak_memory_mib' not in plain['args']            # memory off: as before
    assert retried['args']['peak_memory_mib'] == 80.0
    assert retried['args']['predicted_peak_mib'] == 64.0
    assert retried['args']['oom_retries'] == 1
    [counter] = events(path, 'C')
    assert counter['name'] == 'memory in use'
    assert counter['args'] == {'predicted_MiB': 192.0, 'measured_MiB': 150.0}
    assert counter['ts'] == retried['ts'] - 1000.0           # at its dispatch
    [oom] = [e for e in events(path, 'i') if e.get('cat') == 'memory']
    assert oom['tid'] == 1 and oom['ts'] == retried['ts']


def test_trace_has_what_the_report_reads(tmp_path):
    """The build's command line and memory mode (once), a failed command's captured
    output, and the fields command_args() adds on the command's thread."""
    path = tmp_path / 't.json'
    nodes = [{'targets': ['a.o'], 'inputs': ['a.c']}, None, ZeroDivisionError]

    def command_args():
        value = nodes.pop(0)
        if value is ZeroDivisionError:
            raise value()
        return value
    trace = spawnpool.TraceWriter(path, 'scons', 'scons -j2 x', command_args)
    memory = dict(predicted_peak_bytes=MIB, peak_memory_bytes=MIB, memory_source='cgroup',
                  predicted_in_use_bytes=MIB, measured_in_use_bytes=MIB)
    trace.add(result(0, 0, 0, MS, 2 * MS, 3 * MS, **memory), 'cc -c a.c')
    trace.add(result(1, 0, 0, MS, 2 * MS, 3 * MS, returncode=1, stdout=b'out\n',
                     stderr=b'err \xff\n', **memory), 'failing')
    trace.add(result(1, 0, 0, MS, 2 * MS, 3 * MS, returncode=2, jobserver_wait_ns=MS // 2,
                     slot_wait_ns=MS), 'not captured')
    trace.close()
    compiled, failing, uncaptured = events(path)
    assert compiled['args']['targets'] == ['a.o'] and compiled['args']['inputs'] == ['a.c']
    assert 'output' not in compiled['args']                 # it succeeded
    assert failing['args']['output'] == 'out\nerr \ufffd\n' and 'targets' not in failing['args']
    assert 'output' not in uncaptured['args']                # its output went to the console
    assert (uncaptured['args']['jobserver_wait_ms'], uncaptured['args']['slot_wait_ms']) == (0.5, 1.0)
    assert 'local_slot_wait_ms' not in uncaptured['args']    # it did not wait for one
    builds = [e['args'] for e in events(path, 'M') if e['name'] == 'spawnpool_build']
    assert builds == [{'command_line': 'scons -j2 x'}, {'memory_mode': 'cgroup per command'}]
