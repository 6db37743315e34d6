"""What the pyte engine answers about its own state: DECRQM (modes) and DECRQSS (settings), as xterm words them.

A program that asks whether a mode exists (``CSI ? 2026 $ p``) and hears "unknown" decides the terminal lacks it;
one told "set" or "reset" trusts what it hears. So a mode is reported as known only where the pyte engine keeps its
state: the modes it acts on, and those that only record what the program set (mouse reporting, bracketed paste,
synchronized output: nothing to draw, and the Ghostty engine reports them the same way). Everything else, as xterm
does for a mode it lacks, is "not recognized" (0).

Answers are computed when the screen reaches the query (``sanitize.Report``), so they describe the screen after
the output before the query, not when the chunk was filtered.
"""

from __future__ import annotations

from typing import Protocol

from pyte import graphics
from pyte.screens import Char, Margins

# DECRQM's states (xterm's ctlseqs: 0 not recognized, 1 set, 2 reset, 3 permanently set, 4 permanently reset).
UNKNOWN, SET, RESET, ALWAYS_SET = 0, 1, 2, 3
ANSI_MODES = frozenset({4, 20})  # IRM, LNM
# DECCKM, DECCOLM (ignored: the PTY's size is the screen's), DECSCNM, DECOM, DECAWM, blinking cursor, DECTCEM,
# the mouse and focus reports, bracketed paste, synchronized output.
PRIVATE_MODES = frozenset({1, 3, 5, 6, 7, 12, 25, 9, 1000, 1002, 1003, 1004, 1005, 1006, 1015, 1016, 2004, 2026})
ALT_MODES = frozenset({47, 1047, 1049})  # the alternate screen: set while entered by that mode
SAVE_CURSOR_MODE = 1048  # an action (DECSC / DECRC), never a state: always reset, as Ghostty reports it
GRAPHEME_CLUSTERS = 2027  # cells always hold whole grapheme clusters (``cells``): permanently set

# pyte's colour names back to their SGR codes; other colours are kept as RGB hex (256-colour ones too).
_FG = {name: code for code, name in {**graphics.FG_ANSI, **graphics.FG_AIXTERM}.items() if name != "default"}
_BG = {name: code for code, name in {**graphics.BG_ANSI, **graphics.BG_AIXTERM}.items() if name != "default"}
_FLAGS = (("bold", 1), ("italics", 3), ("underscore", 4), ("blink", 5), ("reverse", 7), ("strikethrough", 9))


class ModalScreen(Protocol):
    """What the answers read of ``screen.TerminalScreen``."""

    mode: set[int]
    margins: Margins | None
    lines: int

    @property
    def alt_mode(self) -> int | None: ...


def mode_report(screen: ModalScreen, code: int, *, private: bool) -> str:
    """DECRPM: ``CSI [?] code ; state $ y``."""
    return f"\x1b[{'?' if private else ''}{code};{_mode_state(screen, code, private=private)}$y"


def _mode_state(screen: ModalScreen, code: int, *, private: bool) -> int:
    if not private:
        return (SET if code in screen.mode else RESET) if code in ANSI_MODES else UNKNOWN
    if code in ALT_MODES:
        return SET if screen.alt_mode == code else RESET
    if code == SAVE_CURSOR_MODE:
        return RESET
    if code == GRAPHEME_CLUSTERS:
        return ALWAYS_SET
    if code in PRIVATE_MODES:
        return SET if code << 5 in screen.mode else RESET
    return UNKNOWN


def sgr_report(attrs: Char) -> str:
    """DECRQSS ``m``: the pen as one SGR, in the ``;`` form pyte's own parser reads back (the sanitizer drops the
    ``:`` form Ghostty reports)."""
    params = ["0"] + [str(code) for name, code in _FLAGS if getattr(attrs, name)]
    for colour, names, base in ((attrs.fg, _FG, 38), (attrs.bg, _BG, 48)):
        if colour == "default":
            continue
        if colour in names:
            params.append(str(names[colour]))
        else:
            r, g, b = (int(colour[i : i + 2], 16) for i in (0, 2, 4))
            params.append(f"{base};2;{r};{g};{b}")
    return f"\x1bP1$r{';'.join(params)}m\x1b\\"


def margins_report(screen: ModalScreen) -> str:
    """DECRQSS ``r``: the scroll region, the whole screen when none is set."""
    top, bottom = screen.margins or Margins(0, screen.lines - 1)
    return f"\x1bP1$r{top + 1};{bottom + 1}r\x1b\\"
