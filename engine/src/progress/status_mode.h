// Which status a build gets (issue 18 item 2), from the option's value and the stream it
// goes to, by the conventions users expect: a line redrawn in place only on a terminal
// that can take escape codes, progress lines without escape codes on a dumb terminal or
// where a line was asked for into a pipe, nothing by default into a pipe:
//
//   auto    line on a terminal (plain when TERM=dumb or unset), off otherwise
//   line    line on a terminal; plain on a dumb terminal or where it is not a terminal
//           (no escape codes into a pipe), unless CLICOLOR_FORCE asks for them anyway
//   plain   a progress line every 10 s or 10% (no escape codes anywhere)
//   off     nothing
//
// The line has no colour, so NO_COLOR changes nothing in it. Every front end asks this
// one function: the Python package (status.py), `spawnpool run`, the SCons plugin and a
// C++ driver (spawnpool/status.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "engine/src/progress/status_printer.h"

namespace spawnpool::detail {

/// What the environment says about the terminal: TERM ("" when unset), whether
/// CLICOLOR_FORCE is set to something other than "" or "0", whether the locale is UTF-8
/// (the first of LC_ALL, LC_CTYPE, LANG that is set: " · " between the line's parts,
/// else " - "), and whether the terminal rewraps lines when it narrows (all but xterm,
/// XTERM_VERSION, which cuts them: StatusPrinterOptions::terminal_reflows).
struct TerminalConventions {
  std::string term;
  bool clicolor_force = false;
  bool utf8 = false;
  bool reflows = true;
  static TerminalConventions from_environment();
};

/// The printer's options for `mode` on `fd` by those conventions.
StatusPrinterOptions status_printer_options(StatusMode mode, int fd,
                                            const TerminalConventions& conventions);

/// Whether `setting` is one of auto, line, plain, off (any case, blanks around it).
bool valid_status_setting(std::string_view setting);

/// kLine, kPlain or nothing (off) for `setting` (as above; "" is auto, and a setting
/// that is not valid is taken as auto) on the descriptor `fd`.
std::optional<StatusMode> status_mode(std::string_view setting, int fd,
                                      const TerminalConventions& conventions);

}  // namespace spawnpool::detail
