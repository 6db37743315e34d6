"""The sends of a session an agent may still ask after: by request key (a retry answers the same send), the keys
a crash lost (never typed again), and the last few settled ones by operation id."""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import final

from ptyd.backends.session.send import SendOp

RECENT_OPS = 16  # settled sends kept for a wait that names its operation_id


@final
class KnownSends:
    def __init__(self, keys_remembered: int) -> None:
        self._bound = keys_remembered  # request keys (and lost keys) kept, the oldest dropped first
        self._keys: OrderedDict[str, SendOp] = OrderedDict()
        self._lost: dict[str, str] = {}  # request keys of sends a crash lost (their op ids): never typed again
        self._recent: deque[SendOp] = deque(maxlen=RECENT_OPS)  # settled ops an agent may still wait on by id

    def by_key(self, request_key: str | None) -> SendOp | None:
        return self._keys.get(request_key) if request_key is not None else None

    def lost_op(self, request_key: str | None) -> str | None:
        """The operation id of the send with this key that a crash lost, if it did."""
        return self._lost.get(request_key) if request_key is not None else None

    def keep(self, op: SendOp) -> None:
        """Keep a new send for a repeat of its request key, if it has one; the oldest key goes past the bound."""
        key = op.request.request_key
        if key is not None:
            self._keys[key] = op
            while len(self._keys) > self._bound:
                self._keys.popitem(last=False)

    def restore(self, op: SendOp) -> None:
        """Keep a send the previous daemon kept (it kept no more than the bound)."""
        if op.request.request_key is not None:
            self._keys[op.request.request_key] = op

    def settled(self, op: SendOp) -> None:
        self._recent.append(op)

    def lose(self, op_id: str, request_key: str | None) -> None:
        if request_key is not None and request_key not in self._keys:
            self._lost[request_key] = op_id
            while len(self._lost) > self._bound:
                self._lost.pop(next(iter(self._lost)))

    def lost_keys(self) -> dict[str, str]:
        return dict(self._lost)

    def keyed(self) -> list[SendOp]:
        """The sends kept by request key, oldest first."""
        return list(self._keys.values())

    def all(self) -> list[SendOp]:
        """Every send kept: by key, then the recent ones."""
        return [*self._keys.values(), *self._recent]
