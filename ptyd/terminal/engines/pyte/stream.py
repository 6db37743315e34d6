"""pyte's parser with the CSI sequences pyte 0.8.2 lacks or moves wrongly with, and no output lost to a sequence a
handler rejects.

pyte dispatches ``CSI params final`` to ``screen.<method>(*params)``; a handler that raises (extra parameters,
``ESC[4J``) makes pyte reset its parser and re-raise out of ``feed``, which drops the rest of the text passed to
that call. ``TerminalStream.feed`` carries on after the bad sequence instead, as a terminal does.
"""

from __future__ import annotations

from typing import Any, final

import pyte


@final
class TerminalStream(pyte.Stream):
    csi = {
        **pyte.Stream.csi,
        "A": "move_up",  # CUU, CUD, VPR and VPB: pyte's cursor_up/down minus the pending wrap
        "B": "move_down",
        "e": "move_down",
        "k": "move_up",  # VPB
        "`": "cursor_to_column",  # HPA (pyte maps it to "'", which is no final byte)
        "j": "cursor_back",  # HPB
        "S": "scroll_up",  # SU
        "T": "scroll_down",  # SD
        "b": "repeat_last",  # REP: ncurses draws runs of one character with it (terminfo ``rep``)
        "s": "save_cursor_ansi",  # SCOSC
        "u": "restore_cursor_ansi",  # SCORC
        "I": "forward_tab",  # CHT
        "Z": "back_tab",  # CBT
        "y": "send_answer",  # sanitize.ANSWER_MARKER
    }
    escape = {**pyte.Stream.escape, "E": "next_line"}  # NEL returns to column 1; pyte made it a bare linefeed
    events = frozenset(pyte.Stream.events | set(csi.values()) | {"next_line"})

    def __init__(self, screen: Any) -> None:
        super().__init__(screen)
        # Honour charset designation (ESC ( 0: DEC line drawing, which ncurses uses for boxes under
        # xterm-256color). pyte ignores it in "UTF-8 mode"; decoding happens before pyte anyway.
        self.use_utf8 = False

    def feed(self, data: str) -> None:
        send = self._send_to_parser
        assert self.listener is not None
        draw = self.listener.draw
        match_text = self._text_pattern.match
        taking_plain_text = self._taking_plain_text
        length = len(data)
        offset = 0
        while offset < length:
            if taking_plain_text:
                match = match_text(data, offset)
                if match:
                    start, offset = match.span()
                    draw(data[start:offset])
                else:
                    taking_plain_text = False
            else:
                try:
                    taking_plain_text = send(data[offset : offset + 1])
                except Exception:  # the parser has reset itself: only this sequence is dropped
                    taking_plain_text = True
                offset += 1
        self._taking_plain_text = taking_plain_text
