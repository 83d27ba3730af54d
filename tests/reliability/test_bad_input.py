"""Bad input gives a clear SpawnError (an OSError with errno, stage and filename), never
a crash, and the pool goes on serving.

Stages: "request" for what the engine refuses before anything is sent (sizes beyond what
execve accepts, NUL bytes), "chdir" for the working directory, "exec" for the program.
Where subprocess.Popen can fail the same way, its errno is the reference.

An unreadable cwd cannot be shown as root (root enters any directory): that case runs a
second driver as user nobody against a root-owned 0700 directory; as root the tests use
a missing directory and a regular file instead.
"""

import errno
import os
import shutil
import stat
import subprocess
import tempfile

import pytest

import spawnpool
from reliability_support import nobody_can_run, run_as_nobody

ARG_MAX = os.sysconf("SC_ARG_MAX")
MAX_ARG_STRLEN = 32 * 4096  # the kernel's limit on one string, NUL included


@pytest.fixture(scope="module")
def pool():
    with spawnpool.Pool(slots=2) as p:
        spawners = list(p.spawner_pids)
        yield p
        # No bad input may cost a spawner its life.
        assert p.spawner_pids == spawners
        assert p.run(["/bin/echo", "alive"], capture=True).stdout == b"alive\n"


def spawn_error(pool, argv, **kwargs):
    with pytest.raises(spawnpool.SpawnError) as info:
        pool.run(argv, **kwargs)
    assert not isinstance(info.value, spawnpool.SpawnerDied)
    return info.value


def popen_errno(argv, **kwargs):
    with pytest.raises(OSError) as info:
        subprocess.Popen(argv, **kwargs)
    return info.value.errno


# ------------------------------------------------------------------ request stage

def test_longest_single_argument_exec_accepts_runs(pool):
    arg = "x" * (MAX_ARG_STRLEN - 1)
    r = pool.run(["/bin/sh", "-c", 'echo ${#1}', "sh", arg], capture=True)
    assert (r.returncode, r.stdout) == (0, f"{len(arg)}\n".encode())


@pytest.mark.parametrize("case", ["one argument", "all arguments", "one env entry",
                                  "whole environment"])
def test_beyond_what_exec_accepts_is_e2big(pool, case):
    big = "x" * MAX_ARG_STRLEN  # one byte too many with its NUL
    chunk = "y" * 100_000
    many = [chunk] * (ARG_MAX // len(chunk) + 2)
    argv, env = ["/bin/true"], {"PATH": "/usr/bin:/bin"}
    if case == "one argument":
        argv.append(big)
    elif case == "all arguments":
        argv += many
    elif case == "one env entry":
        env["BIG"] = big
    else:
        env.update({f"V{i}": v for i, v in enumerate(many)})
    e = spawn_error(pool, argv, env=env)
    assert (e.errno, e.stage) == (errno.E2BIG, "request"), e
    assert "exec accepts at most" in str(e)
    if case == "one argument":
        assert popen_errno(argv, env=env) == errno.E2BIG  # the kernel agrees


@pytest.mark.parametrize("where", ["program", "argument", "env value", "env name", "cwd"])
def test_nul_byte_is_einval(pool, where):
    argv, env, cwd = ["/bin/true", "ok"], None, None
    if where == "program":
        argv[0] = "/bin/tr\0ue"
    elif where == "argument":
        argv[1] = "o\0k"
    elif where == "env value":
        env = {"A": "x\0y"}
    elif where == "env name":
        env = {"A\0B": "1"}
    else:
        cwd = "/tmp\0/x"
    e = spawn_error(pool, argv, env=env, cwd=cwd)
    assert (e.errno, e.stage) == (errno.EINVAL, "request"), e
    assert "NUL" in str(e)


@pytest.mark.parametrize("argv", [[], [""]])
def test_no_program_name_is_einval(pool, argv):
    e = spawn_error(pool, argv)
    assert (e.errno, e.stage) == (errno.EINVAL, "request"), e


def test_malformed_arguments_raise_python_errors(pool):
    with pytest.raises(TypeError):
        pool.run("/bin/true")  # a string, not a sequence of arguments
    with pytest.raises(ValueError):
        pool.run(["/bin/true"], env={"A=B": "1"})
    with pytest.raises(ValueError):
        pool.run(["/bin/true"], env={"": "1"})


# ------------------------------------------------------------------ chdir stage

@pytest.mark.parametrize("kind,expected", [("missing", errno.ENOENT),
                                           ("regular file", errno.ENOTDIR)])
def test_bad_cwd(pool, tmp_path, kind, expected):
    cwd = tmp_path / "missing"
    if kind == "regular file":
        cwd = tmp_path / "file"
        cwd.write_text("")
    e = spawn_error(pool, ["/bin/true"], cwd=str(cwd))
    assert (e.errno, e.stage, e.filename) == (expected, "chdir", str(cwd)), e
    assert popen_errno(["/bin/true"], cwd=str(cwd)) == expected


# ------------------------------------------------------------------ exec stage

def make_file(path, content, mode):
    path.write_bytes(content)
    path.chmod(mode)
    return str(path)


@pytest.mark.parametrize("kind,expected", [
    ("missing absolute", errno.ENOENT),
    ("missing on PATH", errno.ENOENT),
    ("not executable", errno.EACCES),
    ("not executable on PATH", errno.EACCES),
    ("directory", errno.EACCES),
    ("garbage with x bit", errno.ENOEXEC),
    ("missing interpreter", errno.ENOENT),
])
def test_program_that_cannot_run(pool, tmp_path, kind, expected):
    env = {"PATH": str(tmp_path)}
    program = {
        "missing absolute": str(tmp_path / "nope"),
        "missing on PATH": "spawnpool-no-such-program",
        "not executable": make_file(tmp_path / "plain", b"#!/bin/sh\n", 0o644),
        "not executable on PATH": os.path.basename(
            make_file(tmp_path / "plain2", b"#!/bin/sh\n", 0o644)),
        "directory": str(tmp_path),
        "garbage with x bit": make_file(tmp_path / "junk", b"\x00\x01\x02junk", 0o755),
        "missing interpreter": make_file(tmp_path / "script", b"#!/nonexistent/sh\n", 0o755),
    }[kind]
    e = spawn_error(pool, [program], env=env)
    assert (e.errno, e.stage, e.filename) == (expected, "exec", program), e
    assert "cannot execute" in str(e)
    assert popen_errno([program], env=env) == expected


def test_path_search_skips_a_non_executable_match(pool, tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    make_file(first / "tool", b"#!/bin/sh\necho wrong\n", 0o644)
    make_file(second / "tool", b"#!/bin/sh\necho right\n", 0o755)
    r = pool.run(["tool"], env={"PATH": f"{first}:{second}"}, capture=True)
    assert (r.returncode, r.stdout) == (0, b"right\n")


NOBODY_DRIVER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import spawnpool
out = {}
with spawnpool.Pool(slots=1) as pool:
    for label, argv, cwd in (("cwd", ["/bin/true"], sys.argv[2]),
                             ("program", [sys.argv[3]], None)):
        try:
            pool.run(argv, cwd=cwd)
            out[label] = "ran"
        except spawnpool.SpawnError as e:
            out[label] = [e.errno, e.stage]
print(json.dumps(out))
"""


@pytest.mark.skipif(not nobody_can_run(), reason="needs root and setpriv to act as nobody")
def test_unreadable_cwd_and_program_as_another_user():
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(spawnpool.__file__)))
    locked = tempfile.mkdtemp(prefix="spawnpool-locked-")  # root, 0700
    try:
        program = os.path.join(tempfile.gettempdir(), os.path.basename(locked) + "-tool")
        with open(program, "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(program, 0o700)  # root's: nobody may not execute it
        assert stat.S_IMODE(os.stat(locked).st_mode) == 0o700
        out = run_as_nobody(NOBODY_DRIVER, package_parent, locked, program)
    finally:
        shutil.rmtree(locked, ignore_errors=True)
        if os.path.exists(program):
            os.unlink(program)
    assert out == {"cwd": [errno.EACCES, "chdir"], "program": [errno.EACCES, "exec"]}, out
