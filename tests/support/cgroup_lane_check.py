"""cgroup_lane_check.py JUNIT BINARY...: did this machine's cgroup tests run (scripts/test)?

Reads ctest's JUnit file (ctest --output-junit JUNIT) and the case names of each cgroup
test BINARY (--list-test-names-only). Prints one line: how many of those cases ran and
how many were skipped, or why cgroups cannot be used here (cgroup_support). Where a test
cgroup can be made, a skipped cgroup case is a test or product bug (a v2 hierarchy
without +memory once skipped them all), so each is listed with its reason and the exit
status is 1. Exempt: a case that needs root, when this is not root; and a case that needs a
cgroup per command (v2 with the memory controller and clone3's CLONE_INTO_CGROUP), which a
v1 memory hierarchy cannot give: tests/vm's lane runs those on a v2 kernel.
"""

# The words such a case's skip reason starts with, or holds (tests/unit/cgroup).
NEEDS_ROOT = 'needs root'
NEEDS_CGROUP_PER_COMMAND = 'no cgroup per command here'

import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import cgroup_support


def case_names(binary):
    out = subprocess.run([binary, '--list-test-names-only'], stdout=subprocess.PIPE,
                         universal_newlines=True).stdout  # exit status: the count
    return {line.strip() for line in out.splitlines() if line.strip()}


def skip_reason(testcase):
    out = testcase.findtext('system-out') or ''
    for line in out.splitlines():
        if line.startswith('SKIPPED: '):
            return line.split(': ', 2)[-1]
    marker = testcase.find('skipped')
    return (marker.get('message') if marker is not None else None) or 'no reason printed'


def main(junit, binaries):
    names = set().union(*(case_names(b) for b in binaries))
    ran, skipped = 0, []
    for testcase in ElementTree.parse(junit).getroot().iter('testcase'):
        if testcase.get('name') not in names:
            continue
        if testcase.find('skipped') is not None or testcase.get('status') == 'notrun':
            skipped.append((testcase.get('name'), skip_reason(testcase)))
        else:
            ran += 1
    unusable = cgroup_support.unavailable_reason()
    print('cgroup tests here: %d ran, %d skipped%s' % (
        ran, len(skipped), '' if unusable is None else ' (no cgroup here: %s)' % unusable))
    if unusable is not None:
        return 0
    root = os.geteuid() == 0
    bad = [(n, r) for n, r in skipped if (root or not r.startswith(NEEDS_ROOT))
           and NEEDS_CGROUP_PER_COMMAND not in r]
    for name, reason in bad:
        print('  skipped where cgroups are usable: %s: %s' % (name, reason))
    if ran == 0 or bad:
        print('cgroup tests: FAILED: cgroups are usable here, yet cgroup tests did not run')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1], sys.argv[2:]))
