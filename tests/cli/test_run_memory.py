"""``spawnpool run --memory``: the history option, a malformed budget, the statistics'
memory lines, and the OOM killer's message for a command that never fits (the runner
then runs in a capped cgroup of the test's own)."""

import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import BUILD, SYSTEM_PYTHON, module_env, needs_module

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'support'))
import cgroup_support  # noqa: E402  (tests/support: memory cgroups of the test's own)

pytestmark = needs_module


def run(args, cwd, prefix=()):
    r = subprocess.run(list(prefix) + [SYSTEM_PYTHON, '-m', 'spawnpool', 'run'] + list(args),
                       cwd=cwd, capture_output=True, env=module_env(), timeout=120)
    return r.returncode, r.stdout.decode(errors='replace'), r.stderr.decode(errors='replace')


def test_memory_with_history_and_stats(tmp_path):
    (tmp_path / 'cmds').write_text('true\necho hi\ntrue\n')
    rc, out, err = run(['-j', '2', '--memory=auto', '--history=state/', '--stats', 'cmds'],
                       tmp_path)
    assert rc == 0, err
    assert out == 'hi\n'
    assert 'delayed for memory:' in err and 'prediction error:' in err, err
    assert 'memory measured by: ' in err, err   # Result.memory_mode of the first
    assert (tmp_path / 'state' / 'memory-history.sqlite').is_file()


def test_a_malformed_budget_is_a_usage_error(tmp_path):
    (tmp_path / 'cmds').write_text('true\n')
    rc, _, err = run(['--memory=lots', 'cmds'], tmp_path)
    assert rc == 2
    assert "memory budget 'lots' is not auto, off, or a size" in err, err


def test_a_command_that_never_fits_reports_the_oom_killer(tmp_path):
    alloc = BUILD / 'tests' / 'helpers' / 'alloc_touch'
    if not alloc.exists():
        pytest.skip('%s is not built' % alloc)
    (tmp_path / 'cmds').write_text('%s 400\n' % alloc)
    with cgroup_support.TestCgroup(limit_bytes=192 << 20, holds_driver=True) as cap:
        join = ['/bin/sh', '-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', cap.path]
        rc, _, err = run(['--memory=2G', 'cmds'], tmp_path, prefix=join)
    assert rc == 1, err
    # sh's status for a SIGKILL (direct exec gives what sh would), then why.
    assert ("spawnpool: *** [line 1] Error 137, killed by the kernel's OOM killer (peak "
            in err and ' MiB, budget 2048 MiB): ' in err), err
