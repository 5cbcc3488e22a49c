// The live progress line, drawn in place on a terminal. A rank under levers'
// launcher has a pipe, not a terminal: it sends each redraw as a line starting
// with kProgressMark, and the launcher draws it in place on its own terminal
// (clearing it before any other line, so it never interleaves with them).
#pragma once

namespace levers {

enum class LiveProgress { off, terminal, launcher };

inline constexpr char kProgressMark = '\x1e';  // ASCII record separator: never in a rank's own output

// terminal if this process's console is one; launcher if the launcher asked
// for marked lines (LEVERS_LIVE_PROGRESS=1); else off.
LiveProgress live_progress_mode();

}  // namespace levers
