"""Named keys, encoded as the terminal would send them in the modes the program set.

A program that turns on application cursor keys (DECCKM: vim, less, htop, mc and every curses program with
``keypad``) recognises the arrows, Home and End only in their SS3 form (``ESC O B``); the CSI form (``ESC [ B``)
an agent would type reaches it as three keys: Escape, ``[`` and ``B``. So a send can name keys instead, and they
are encoded here from the terminal's modes, as xterm encodes them.

Names (case-insensitive): Enter, Tab, BTab, Escape/Esc, Space, Backspace/BSpace, Delete/DC, Insert/IC, Home, End,
PageUp/PgUp/PPage, PageDown/PgDn/NPage, Up, Down, Left, Right, F1-F12; any single character. Modifiers as in
tmux: ``C-`` (Ctrl), ``M-`` (Alt/Meta), ``S-`` (Shift), combined (``C-S-Left``): a control character for
``C-`` with a letter or one of ``@[\\]^_? `` (space), xterm's modifier parameter for the special keys
(``ESC [ 1 ; 5 A``), and ESC before the key for ``M-`` elsewhere.
"""

from __future__ import annotations

# The cursor keys (DECCKM sends them as SS3), the tilde keys' codes, F1-F4 (SS3 without modifiers), plain keys.
_CURSOR = {"up": "A", "down": "B", "right": "C", "left": "D", "home": "H", "end": "F"}
_TILDE = {"insert": 2, "ic": 2, "delete": 3, "dc": 3, "pageup": 5, "pgup": 5, "ppage": 5}
_TILDE |= {"pagedown": 6, "pgdn": 6, "npage": 6, "f5": 15, "f6": 17, "f7": 18, "f8": 19, "f9": 20, "f10": 21}
_TILDE |= {"f11": 23, "f12": 24}
_SS3_FUNCTION = {"f1": "P", "f2": "Q", "f3": "R", "f4": "S"}
_PLAIN = {"enter": "\r", "tab": "\t", "escape": "\x1b", "esc": "\x1b", "space": " ", "backspace": "\x7f"}
_PLAIN |= {"bspace": "\x7f", "btab": "\x1b[Z"}
_MODIFIERS = {"s": 1, "m": 2, "c": 4}  # xterm's parameter is 1 + the sum


def encode(keys: list[str], *, app_cursor: bool) -> str:
    """The bytes (as text) the keys send; ValueError names the first key that is not one."""
    return "".join(_encode(key, app_cursor) for key in keys)


def _encode(key: str, app_cursor: bool) -> str:
    mods, name = _split(key)
    lower = name.lower()
    if lower in _CURSOR:
        final = _CURSOR[lower]
        if mods:
            return f"\x1b[1;{1 + mods}{final}"
        return ("\x1bO" if app_cursor else "\x1b[") + final
    if lower in _TILDE:
        return f"\x1b[{_TILDE[lower]};{1 + mods}~" if mods else f"\x1b[{_TILDE[lower]}~"
    if lower in _SS3_FUNCTION:
        return f"\x1b[1;{1 + mods}{_SS3_FUNCTION[lower]}" if mods else "\x1bO" + _SS3_FUNCTION[lower]
    if lower in _PLAIN:
        text = _PLAIN[lower]
        if lower == "tab" and mods & 1:
            text, mods = "\x1b[Z", mods & ~1
    elif len(name) == 1:
        text = name
    else:
        raise ValueError(f"unknown key {key!r}: name one (Enter, Up, F5, C-c, M-x, ...) or send text as input")
    if mods & 4:
        text = _control(text, key)
    if mods & 1 and len(text) == 1 and text.isalpha():
        text = text.upper()
    return "\x1b" + text if mods & 2 else text


def _split(key: str) -> tuple[int, str]:
    """(modifier bits, key name) of ``C-M-x``-style names; a lone ``-`` or a name ending in one is the key."""
    mods = 0
    while len(key) > 2 and key[1] == "-" and key[0].lower() in _MODIFIERS:
        mods |= _MODIFIERS[key[0].lower()]
        key = key[2:]
    if not key:
        raise ValueError("an empty key")
    return mods, key


def _control(text: str, key: str) -> str:
    if text == "?":
        return "\x7f"
    if text == " ":
        return "\x00"
    if len(text) == 1 and 64 <= ord(text.upper()) <= 95:  # @ A-Z [ \ ] ^ _
        return chr(ord(text.upper()) - 64)
    raise ValueError(f"{key!r}: Ctrl goes with a letter, space or one of @[\\]^_?")
