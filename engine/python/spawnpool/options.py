"""The build-feature options, declared once for every front end.

`OPTIONS` lists them; each front end adds them under its own names and parses them its
own way, then `Settings.from_values()` turns the parsed values into one Settings, from
which stack.py builds the layers:

    option         spawnpool run        scons --process-spawner ...
    output         --output=MODE        --process-spawner-output=MODE
    trace          --trace=FILE         --process-spawner-trace=FILE
    ...            --NAME               --process-spawner-NAME   (dest: process_spawner_NAME)

A new option is one more entry here with its converter, one more Settings field, and its
use in stack.py or in `Settings.pool_options()` (what Pool() is given, as for
``memory=auto|SIZE|off`` and ``history=PATH``); neither front end changes.

No imports beyond the standard library: the SCons plugin adds these options even when
the compiled module cannot be loaded.
"""

import collections
import os

__all__ = ['OPTIONS', 'Option', 'Settings', 'add_to_argparse', 'add_to_scons', 'HISTORY_FILE']

#: The history's file name inside a directory (SCons' default: .spawnpool/ at the top),
#: as the engine names it (engine/src/stack/build_history.cc).
HISTORY_FILE = 'memory-history.sqlite'



def _yes_no(value):
    return value if isinstance(value, bool) else value == 'yes'    # a Python caller's bool


def _names(value):
    names = value.split(',') if isinstance(value, str) else value  # or a list already
    return [n.strip() for n in names if n.strip()]


class Option(collections.namedtuple('Option', 'name kind help default choices metavar '
                                     'convert', defaults=(None,) * 4)):
    """One option: `kind` is 'choice', 'string', 'int' or 'flag'; `convert` maps the
    parsed value (not None) to the Settings field."""

    __slots__ = ()

    @property
    def field(self):
        return self.name.replace('-', '_')

    def value(self, parsed):
        value = self.default if parsed is None else parsed
        return self.convert(value) if self.convert and value is not None else value


OPTIONS = (
    Option('output', 'choice', "passthrough (default) or sync: print each command's output "
           'as one block when it ends', default='passthrough',
           choices=('passthrough', 'sync'), metavar='MODE'),
    Option('trace', 'string', 'write a Chrome trace-event file of the commands (Perfetto, '
           'chrome://tracing)', metavar='FILE'),
    Option('report', 'string', 'at the end, write an HTML report of the build to FILE '
           '(timeline, waits, failed commands, critical path; spawnpool report)',
           metavar='FILE'),
    Option('stats', 'flag', 'print command and pool statistics at the end', default=False),
    Option('direct-exec', 'choice', 'run commands without shell syntax without sh '
           '(default: yes)', default='yes', choices=('yes', 'no'), metavar='yes|no',
           convert=_yes_no),
    Option('launcher', 'string', 'run C/C++ compiles through PROGRAM (distcc, ccache, '
           'icecc, ...)', metavar='PROGRAM'),
    Option('compilers', 'string', 'with a launcher: more compiler names, comma-separated '
           '(icc,foo-gcc)', metavar='LIST', convert=_names),
    Option('local', 'int', 'at most N commands on this machine at once (default with a '
           'launcher: number of CPUs)', metavar='N'),
    Option('jobserver', 'choice', 'share the job slots of a make jobserver in MAKEFLAGS '
           '(default: yes)', default='yes', choices=('yes', 'no'), metavar='yes|no',
           convert=_yes_no),
    Option('memory', 'string', 'memory-aware admission: start a command only while the '
           'predicted peaks fit in auto (what is free, less a reserve) or SIZE (8G, 512M); '
           'an OOM-killed command runs again alone (default: off)', default='off',
           metavar='auto|SIZE|off'),
    Option('status', 'choice', 'a progress line with the ETA: auto (line on a terminal, '
           'else off), line (the bottom line of the terminal), plain (a line every 10 s or '
           'tenth of the build, for logs), off (default: auto)', choices=('auto', 'line', 'plain', 'off'),
           metavar='auto|line|plain|off'),
    Option('history', 'string', "the file of the commands' history (peaks and durations; "
           'a directory: memory-history.sqlite in it), kept with memory admission or a status '
           'line; off: none', metavar='PATH|off'),
    Option('same-cpu-handoff', 'choice', "wake each spawner on the submitting thread's CPU "
           'and start the command there (default: no; docs/architecture.md, "The CPU '
           'hint")', default='no', choices=('yes', 'no'), metavar='yes|no',
           convert=_yes_no),
)


class Settings:
    """The options' values for one build.  `flag(name)` spells an option as the front
    end does, for messages; `base_dir` is where a relative trace, report or history path
    starts; `default_history` is the history kept where none is named
    (SCons: .spawnpool/ at the top of the build; None: no history)."""

    def __init__(self, flag_prefix='--', base_dir=None, default_history=None, **values):
        self.flag_prefix = flag_prefix
        self.base_dir = base_dir or os.getcwd()
        self.default_history = default_history
        self.status_fd = 1          # where the status line would go (the front end's)
        for option in OPTIONS:
            setattr(self, option.field, option.value(values.pop(option.field, None)))
        if values:
            raise TypeError('unknown options: %s' % ', '.join(sorted(values)))

    @classmethod
    def from_values(cls, values, dest_prefix='', flag_prefix='--', base_dir=None,
                    default_history=None):
        """Settings from a parsed namespace whose attributes are dest_prefix + field."""
        found = {o.field: getattr(values, dest_prefix + o.field, None) for o in OPTIONS}
        return cls(flag_prefix, base_dir, default_history, **found)

    def flag(self, name):
        return self.flag_prefix + name

    def commands_may_wait(self, jobserver):
        """Whether a command may wait to start while a slot is free: for a local slot (a
        launcher, --local), for memory, or for a token of `jobserver` (make's, or None).
        A front end then starts its signal watch (interrupts.py): a stop signal must start
        no waiting command before its handler has run."""
        return bool(self.launcher or self.local is not None or self.memory_on
                    or jobserver is not None and self.jobserver)

    @property
    def memory_on(self):
        return (self.memory or 'off').strip().lower() != 'off'

    def status_mode(self, fd=1, environ=None):
        """'line', 'plain' or None: the status line this build gets on `fd` (status.py)."""
        from .status import status_mode
        return status_mode(self.status, fd, environ)

    def history_path(self, status_shown=None, warn=None):
        """The history file, as the engine decides it for every front end
        (spawnpool::history_path, engine/include/spawnpool/session.h): the named one or
        the default, relative to base_dir (a directory: HISTORY_FILE in it); None when
        nothing reads it (memory admission, the status line: `status_shown`, by default
        its mode on status_fd), it is off, or the compiled module is missing.  A history
        named while nothing reads it is one warning through `warn`."""
        try:
            from ._spawnpool import history_path
        except ImportError:
            return None     # nothing could open it
        if status_shown is None:
            status_shown = self.status_mode(self.status_fd) is not None
        return history_path(self.history or '', self.default_history or '', self.base_dir,
                            self.memory_on, status_shown, self.flag_prefix, warn)

    def pool_options(self, warning_prefix='spawnpool: warning: '):
        """Keyword arguments for Pool(): the same-CPU hand-off when it is on, the memory
        budget and history (nothing without memory admission), and the prefix of the
        pool's warnings (the history's file and directories are the pool's to make, and
        its problems a warning)."""
        options = {'same_cpu_handoff': True} if self.same_cpu_handoff else {}
        if not self.memory_on:
            return options
        options.update({'memory_budget': self.memory.strip(),
                        'warning_prefix': '%s%s: ' % (warning_prefix, self.flag('memory'))})
        history = self.history_path()
        if history is not None:
            options['history'] = history
        return options

    def history_warning_prefix(self, warning_prefix='spawnpool: warning: '):
        """What starts the history's warnings (one that cannot be written, say)."""
        return '%s%s: ' % (warning_prefix, self.flag('history'))


def add_to_argparse(parser):
    """Add every option to an argparse parser as --NAME (dest: the field name)."""
    for o in OPTIONS:
        kw = dict(dest=o.field, help=o.help)
        if o.kind == 'flag':
            kw.update(action='store_true', default=False)
        else:
            kw.update(metavar=o.metavar, default=None, choices=o.choices,
                      type=int if o.kind == 'int' else None)
        parser.add_argument('--' + o.name, **kw)


def add_to_scons(add_option, has_option=None, prefix='process-spawner-',
                 note='with --process-spawner: '):
    """AddOption each option as --PREFIX-NAME (dest PREFIX_NAME, '-' as '_') that no
    other copy of the plugin added yet.  Defaults stay None: Settings applies them."""
    for o in OPTIONS:
        flag = '--' + prefix + o.name
        if has_option is not None and has_option(flag):
            continue
        kw = dict(dest=(prefix + o.name).replace('-', '_'), help=note + o.help)
        if o.kind == 'flag':
            kw.update(action='store_true', default=False)
        else:
            kw.update(type={'int': 'int', 'choice': 'choice'}.get(o.kind, 'string'),
                      metavar=o.metavar, default=None)
            if o.choices:
                kw['choices'] = list(o.choices)
        add_option(flag, **kw)
