"""The build report in a real browser (report_browser.py): the page written from a trace
shows one bar per command, the totals, the longest commands, the waits, the failed
commands with their output, the critical path. Each test keeps a screenshot of the page
in the build tree (build/report-screenshots/), for people to look at.

Skipped, with the reason, where Chromium, the build or the package is missing.

    PYTHONPATH=build/python:scons_plugin /usr/bin/python3 -m pytest tests/report
"""

import json
import subprocess
import sys

import pytest

from report_browser import TOOL, load, needs_chromium

pytestmark = [
    needs_chromium,
    pytest.mark.skipif(not TOOL.exists(), reason='%s is not built' % TOOL),
]


def render(tmp_path, trace, name):
    """The report of `trace` (a path) as Chromium left its DOM; a screenshot is kept."""
    page = tmp_path / (name + '.html')
    subprocess.run([str(TOOL), str(trace), str(page)], check=True)
    return load(tmp_path, page, name)


def test_the_report_of_a_real_build(tmp_path):
    """`spawnpool run --report` of six commands, one failing, and `spawnpool report` of
    its trace (the same page): every command is a bar on its slot, the totals count them,
    the failed one is listed with its output (output sync captured it)."""
    try:
        import spawnpool  # noqa: F401
    except ImportError as e:
        pytest.skip('spawnpool is not importable: %s' % e)
    lines = ['sleep 0.4', 'sleep 0.1', 'sleep 0.2', "sh -c 'echo oops >&2; exit 3'",
             'sleep 0.3', 'true']
    (tmp_path / 'commands').write_text('\n'.join(lines) + '\n')
    trace, page = tmp_path / 'trace.json', tmp_path / 'run.html'
    done = subprocess.run([sys.executable, '-m', 'spawnpool', 'run', '-j2', '-k',
                           '--output=sync', '--trace=%s' % trace, '--report=%s' % page,
                           str(tmp_path / 'commands')],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert done.returncode != 0        # one command failed
    ran = [e for e in json.loads(trace.read_text())['traceEvents'] if e['ph'] == 'X']
    assert len(ran) == 6
    again = tmp_path / 'again.html'
    subprocess.run([sys.executable, '-m', 'spawnpool', 'report', str(trace), '-o', str(again)],
                   check=True, timeout=120)
    assert again.read_bytes() == page.read_bytes()

    dom = load(tmp_path, page, 'real-build')
    bars = dom.bars()
    assert len(bars) == 6
    assert sorted(int(b[1]['data-index']) for b in bars) == list(range(6))
    assert dom.card('total-commands') == '6'
    assert dom.card('total-failed') == '1'
    assert len(dom.by_class('longest-row')) == 6
    assert dom.card('wall-time').endswith(' s')
    failed = dom.text('failed')
    assert "echo oops >&2; exit 3" in failed and 'exit 3' in failed and 'oops\n' in failed
    assert 'spawnpool run -j2 -k --output=sync' in dom.text('subtitle')
    assert len(dom.by_class('critical-row')) >= 1
    longest = [''.join(e[2]) for e in dom.by_class('longest-row')]
    assert longest[0].startswith('sleep 0.4')      # the longest first


def _event(name, slot, start_ms, dur_ms, status=0, **args):
    base = {'command': name, 'returncode': status, 'queue_wait_ms': 0.0}
    base.update(args)
    return {'name': name, 'cat': 'command', 'ph': 'X', 'pid': 1, 'tid': slot,
            'ts': start_ms * 1000.0, 'dur': dur_ms * 1000.0, 'args': base}


def test_every_section_from_a_trace_with_dependencies_waits_and_memory(tmp_path):
    """A trace with what a build with memory admission, a jobserver and dependencies
    records: the critical path follows the dependencies, each wait reason has its row,
    the failed command shows its output, the memory chart and the OOM retry appear."""
    events = [
        {'name': 'process_name', 'ph': 'M', 'pid': 1, 'tid': 0, 'args': {'name': 'scons'}},
        {'name': 'spawnpool_build', 'ph': 'M', 'pid': 1, 'tid': 0,
         'args': {'memory_mode': 'cgroup per command', 'command_line': 'scons -j2'}},
        _event('cc -c a.c', 0, 0, 100, targets=['a.o'], inputs=['a.c']),
        _event('cc -c b.c', 1, 0, 300, targets=['b.o'], inputs=['b.c'],
               memory_wait_ms=40.0, jobserver_wait_ms=5.0),
        _event('cc -c c.c', 0, 100, 50, targets=['c.o'], inputs=['c.c'], oom_retries=1),
        _event('ar lib.a', 1, 300, 20, targets=['lib.a'], inputs=['a.o', 'b.o', 'c.o']),
        _event('cc -o prog', 0, 320, 30, status=1, targets=['prog'], inputs=['lib.a'],
               output='ld: undefined reference to <main>\n'),
        {'name': 'memory in use', 'ph': 'C', 'pid': 1, 'ts': 0,
         'args': {'predicted_MiB': 300, 'measured_MiB': 250}},
        {'name': 'memory in use', 'ph': 'C', 'pid': 1, 'ts': 100000,
         'args': {'predicted_MiB': 500, 'measured_MiB': 420}},
        {'name': 'OOM kill: run again alone', 'cat': 'memory', 'ph': 'i', 's': 't',
         'pid': 1, 'tid': 0, 'ts': 100000},
        {'name': 'missing-tool', 'cat': 'command', 'ph': 'i', 's': 'p', 'pid': 1, 'tid': 0,
         'ts': 360000, 'args': {'command': 'missing-tool x', 'error': 'not found',
                                'stage': 'exec'}},
    ]
    trace = tmp_path / 'trace.json'
    trace.write_text(json.dumps({'traceEvents': events, 'displayTimeUnit': 'ms'}))
    dom = render(tmp_path, trace, 'all-sections')

    assert len(dom.bars()) == 5
    assert dom.card('total-commands') == '6'
    assert dom.card('total-failed') == '2'
    assert dom.card('memory-mode') == 'cgroup per command'
    assert dom.card('oom-retries') == '1'
    # Through the dependencies: b.c (300 ms) -> ar -> link, not a.c or c.c.
    critical = [''.join(e[2]) for e in dom.by_class('critical-row')]
    assert [row.startswith(start) for row, start in
            zip(critical, ('1cc -c b.c', '2ar lib.a', '3cc -o prog'))] == [True] * 3
    assert len(critical) == 3
    assert 'through the build' in dom.text('critical-note')
    waits = dom.text('waits')
    assert 'memory' in waits and 'jobserver token' in waits and 'queue' in waits
    failed = dom.text('failed')
    assert 'ld: undefined reference to <main>' in failed   # the < came through escaped
    assert 'did not start (exec): not found' in failed
    assert 'Memory in use' in dom.text('activity')


def test_a_trace_that_is_not_json_is_said_so(tmp_path):
    trace = tmp_path / 'trace.json'
    trace.write_text('{"traceEvents": [ {"ph": "X", }')   # cut short, then a brace
    trace.write_text(trace.read_text() + '}')
    dom = render(tmp_path, trace, 'broken-trace')
    assert 'not valid JSON' in dom.text('subtitle')
    assert not dom.by_class('command')


def test_the_page_needs_no_network(tmp_path):
    trace = tmp_path / 'trace.json'
    trace.write_text('{"traceEvents":[]}')
    page = tmp_path / 'page.html'
    subprocess.run([str(TOOL), str(trace), str(page)], check=True)
    text = page.read_text()
    # The one URL is SVG's namespace name, which is never fetched.
    assert text.count('http') == text.count('http://www.w3.org/2000/svg')
    for attribute in ('src=', 'href=', '@import', 'url('):
        assert attribute not in text
