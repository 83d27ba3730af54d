"""Isolation of a running pool from other processes and other users.

What is checked, and how:
- the segment's name is gone from /dev/shm while the pool runs: the driver's and each
  spawner's /proc/<pid>/maps show the mapping as "(deleted)", no spawner keeps a
  descriptor to it, and the driver's own descriptor is close-on-exec;
- the name has the documented form, spawnpool-<32 hex digits> (128 bits from
  getrandom(2), see engine/src/spawners/segment.cc; a test can only check the form and that
  names differ, not the randomness itself);
- the start window, between creation and unlink: strace(1) shows the object created
  with O_CREAT|O_EXCL and mode 0600 (plus an fchmod to 0600 against the umask), and
  with the unlink delayed by strace's fault injection the object is observed in /dev/shm
  as a 0600 file of ours that user nobody cannot open;
- another user (nobody, via setpriv) reaches nothing of a running pool: not the
  driver's or the spawners' descriptors (/proc/<pid>/fd, pidfd_getfd), memory
  (/proc/<pid>/mem), mappings (/proc/<pid>/maps, map_files), nor can it signal them;
  the lifeline is an unnamed socketpair, reachable only through those descriptors.
Processes of the same user are trusted: they can ptrace the driver anyway.
"""

import json
import os
import re
import shutil
import stat
import subprocess
import time

import pytest

from reliability_support import (PYTHON, SEGMENT_NAME, SHM, children_of, nobody_can_run,
                      run_as_nobody, segment_mappings, wait_until)

O_CLOEXEC = 0o2000000


def fd_target(pid, fd):
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}")
    except FileNotFoundError:  # closed since the listing
        return ""


def new_segment(before):
    names = set(segment_mappings()) - set(before)
    assert len(names) == 1, f"expected one new segment mapping, found {names}"
    return names.pop()


def test_segment_name_is_unlinked_once_spawners_run(make_pool):
    before = segment_mappings()
    pool = make_pool(slots=2)
    name = new_segment(before)
    assert SEGMENT_NAME.match(name), name
    assert segment_mappings()[name] is True, "the driver's mapping is not marked deleted"
    assert not os.path.exists(os.path.join(SHM, name))

    for pid in pool.spawner_pids:
        assert segment_mappings(pid) == {name: True}
        targets = [fd_target(pid, fd) for fd in os.listdir(f"/proc/{pid}/fd")]
        assert not [t for t in targets if "/dev/shm" in t], \
            f"spawner {pid} keeps a descriptor to the segment: {targets}"

    # The driver keeps one descriptor (to start replacements), close-on-exec: a program
    # it starts any other way does not inherit it.
    segment_fds = [fd for fd in os.listdir("/proc/self/fd") if name in fd_target("self", fd)]
    assert len(segment_fds) == 1, segment_fds
    with open(f"/proc/self/fdinfo/{segment_fds[0]}") as f:
        flags = int(re.search(r"flags:\s+(\d+)", f.read()).group(1), 8)
    assert flags & O_CLOEXEC
    listing = subprocess.run(["ls", "-l", "/proc/self/fd"], close_fds=False,
                             capture_output=True, text=True).stdout
    assert "/dev/shm" not in listing, listing
    assert pool.run(["/bin/echo", "still works"], capture=True).stdout == b"still works\n"


def test_segment_names_have_the_random_form_and_differ(make_pool):
    names = set()
    for _ in range(6):
        before = segment_mappings()
        pool = make_pool(slots=1)
        names.add(new_segment(before))
        pool.close()
    assert len(names) == 6
    assert all(SEGMENT_NAME.match(n) for n in names), names


@pytest.mark.skipif(shutil.which("strace") is None,
                    reason="strace is not installed (apt-get install -y strace)")
def test_start_window_object_is_exclusive_and_private(driver_process, tmp_path):
    log = tmp_path / "strace.log"
    driver = subprocess.Popen(
        ["strace", "-o", str(log), "-e", "trace=openat,fchmod,unlink",
         # Hold the driver inside unlink() for 2 s: the start window, made observable.
         "-e", "inject=unlink:delay_enter=2000000",
         PYTHON, "-c", "import spawnpool\n"
                       "with spawnpool.Pool(slots=1) as p:\n"
                       "    print(p.run(['/bin/echo', 'ok'], capture=True).stdout.decode())\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        def window_name():
            for python in children_of(driver.pid):
                try:
                    names = [n for n, deleted in segment_mappings(python).items() if not deleted]
                except FileNotFoundError:
                    continue
                if names:
                    return names[0]
            return None

        name = wait_until(window_name, timeout=20)
        assert name, "never saw the segment during the start window"
        path = os.path.join(SHM, name)
        st = os.stat(path)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
        assert st.st_uid == os.geteuid()
        if nobody_can_run():
            tried = run_as_nobody(
                "import json, os, sys\n"
                "out = {}\n"
                "for label, flags in (('read', os.O_RDONLY), ('write', os.O_RDWR)):\n"
                "    try:\n"
                "        os.close(os.open(sys.argv[1], flags)); out[label] = 'opened'\n"
                "    except OSError as e:\n"
                "        out[label] = e.errno\n"
                "print(json.dumps(out))\n", path)
            assert tried == {"read": 13, "write": 13}, tried  # EACCES
        out, _ = driver.communicate(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
        driver.wait()
    assert driver.returncode == 0 and out.strip() == "ok"
    trace = log.read_text()
    created = re.search(rf'openat\(AT_FDCWD, "/dev/shm/{name}", ([A-Z_|]+), (0\d+)\)\s*= (\d+)',
                        trace)
    assert created, trace
    flags, mode, fd = created.group(1).split("|"), created.group(2), created.group(3)
    assert {"O_CREAT", "O_EXCL", "O_RDWR", "O_CLOEXEC", "O_NOFOLLOW"} <= set(flags), flags
    assert mode == "0600"
    assert re.search(rf"fchmod\({fd}, 0600\)\s*= 0", trace), trace
    assert re.search(rf'unlink\("/dev/shm/{name}"\)\s*= 0', trace), trace
    assert not os.path.exists(path)


NOBODY_PROBE = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
SYS_pidfd_getfd = 438
targets = json.loads(sys.argv[1])
segment = sys.argv[2]

def attempt(action):
    try:
        action()
        return "ok"
    except OSError as e:
        return e.errno

def read(path):
    with open(path, "rb") as f:
        f.read(1)

def write(path):
    with open(path, "wb") as f:
        f.write(b"\x09")

def getfd(pid, fd):
    pidfd = os.pidfd_open(pid)
    try:
        got = libc.syscall(SYS_pidfd_getfd, pidfd, fd, 0)
        if got < 0:
            raise OSError(ctypes.get_errno(), "pidfd_getfd")
        os.close(got)
    finally:
        os.close(pidfd)

results = {}
for pid in targets:
    r = results[str(pid)] = {}
    r["list fd"] = attempt(lambda: os.listdir(f"/proc/{pid}/fd"))
    for fd in range(3, 12):
        r[f"write fd {fd}"] = attempt(lambda: write(f"/proc/{pid}/fd/{fd}"))
        r[f"pidfd_getfd {fd}"] = attempt(lambda: getfd(pid, fd))
    r["list map_files"] = attempt(lambda: os.listdir(f"/proc/{pid}/map_files"))
    r["read maps"] = attempt(lambda: read(f"/proc/{pid}/maps"))
    r["read mem"] = attempt(lambda: read(f"/proc/{pid}/mem"))
    r["write mem"] = attempt(lambda: write(f"/proc/{pid}/mem"))
    r["signal"] = attempt(lambda: os.kill(pid, 0))
results["open by name"] = attempt(lambda: read("/dev/shm/" + segment))
results["listed in /dev/shm"] = segment in os.listdir("/dev/shm")
print(json.dumps(results))
"""


@pytest.mark.skipif(not nobody_can_run(), reason="needs root and setpriv to act as nobody")
def test_another_user_reaches_nothing_of_a_running_pool(make_pool):
    before = segment_mappings()
    pool = make_pool(slots=2)
    name = new_segment(before)
    spawners = list(pool.spawner_pids)
    targets = spawners + [os.getpid()]
    results = run_as_nobody(NOBODY_PROBE, json.dumps(targets), name)

    assert results.pop("listed in /dev/shm") is False
    assert results.pop("open by name") == 2  # ENOENT: the name is gone
    succeeded = {f"{pid}: {what}": how for pid, r in results.items()
                 for what, how in r.items() if how not in (1, 13)}  # EPERM, EACCES
    assert not succeeded, succeeded

    # The pool noticed nothing: same spawners, commands still run.
    time.sleep(0.1)
    assert pool.spawner_pids == spawners
    assert pool.run(["/bin/echo", "ok"], capture=True).stdout == b"ok\n"
