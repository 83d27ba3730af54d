"""Helpers of the build report's browser tests: Debian's headless Chromium loads a report
page, runs its script, and the tests read the DOM it leaves (`--dump-dom`); each page
also gets a screenshot in the build tree (build/report-screenshots/), for people to look
at (docs/img/build-report.png is one of them).

Not named conftest.py: the test modules import it.
"""

import html.parser
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get('SPAWNPOOL_BUILD') or REPO / 'build').resolve()
TOOL = BUILD / 'tests' / 'report' / 'spawnpool_write_report_tool'
SHOTS = BUILD / 'report-screenshots'
CHROMIUM = shutil.which('chromium')
# As the machine's probe starts it: no sandbox as root, and nothing that reaches out to
# the network (this machine's network is closed; the page needs none).
CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
                  '--no-first-run', '--disable-background-networking',
                  '--disable-component-update', '--disable-sync', '--hide-scrollbars']

needs_chromium = pytest.mark.skipif(CHROMIUM is None,
                                    reason='no chromium on PATH (Debian package chromium)')


def chromium(tmp_path, page, *args):
    profile = tmp_path / 'chromium-profile'
    command = [CHROMIUM] + CHROMIUM_FLAGS + ['--user-data-dir=%s' % profile] + list(args)
    command.append(page.as_uri())
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode(errors='replace')[-2000:]
    return done.stdout.decode()


def load(tmp_path, page, name, height=2200):
    """The DOM Chromium leaves of `page` (a path); its screenshot is kept as NAME.png."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / (name + '.png')
    chromium(tmp_path, page, '--window-size=1280,%d' % height, '--screenshot=%s' % shot)
    assert shot.stat().st_size > 10000
    return Dom(chromium(tmp_path, page, '--dump-dom'))


class Dom(html.parser.HTMLParser):
    """The few things the tests read: elements by id and class, and their text."""

    def __init__(self, text):
        super().__init__()
        self.elements = []          # [tag, attrs, text parts]
        self._open = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        element = [tag, dict(attrs), []]
        self.elements.append(element)
        if tag not in ('meta', 'br', 'img', 'input', 'link'):
            self._open.append(element)

    def handle_endtag(self, tag):
        while self._open:
            if self._open.pop()[0] == tag:
                break

    def handle_data(self, data):
        for element in self._open:
            element[2].append(data)

    def by_class(self, name):
        return [e for e in self.elements if name in e[1].get('class', '').split()]

    def bars(self):
        """The timeline's bars, one per command that ran."""
        return [e for e in self.by_class('command') if e[0] == 'rect']

    def text(self, element_id):
        found = [e for e in self.elements if e[1].get('id') == element_id]
        assert found, 'no element #%s' % element_id
        return ''.join(found[0][2])

    def card(self, element_id):
        """A summary card's value (the first line of its text)."""
        card = [e for e in self.elements if e[1].get('id') == element_id][0]
        values = [e for e in self.elements if e[1].get('class') == 'v'
                  and self.elements.index(e) > self.elements.index(card)]
        return ''.join(values[0][2])
