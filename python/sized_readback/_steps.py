"""``CompiledReadback.next()``'s choice of the step to read, without PyTorch (so its errors are
tested where PyTorch is not installed)."""

from __future__ import annotations

from typing import Any, Optional

from ._errors import NothingRecordedError


def next_step(tickets: Any, graph: Any, recordings: int, timeout: Optional[float]) -> Any:
    """The readout of the oldest step not yet read: the first of ``tickets`` (a deque of
    eager tickets), else ``graph``'s next replay. A timeout (``TimeoutError``, or a Ctrl-C)
    leaves that step unread; any other error consumes it. ``NothingRecordedError`` when no
    ticket waits and the graph readback (if any) recorded nothing."""
    if tickets:
        t = tickets[0]
        try:
            out = t.wait(timeout)
        except TimeoutError:
            raise
        except Exception:
            tickets.popleft()
            raise
        tickets.popleft()
        return out
    if graph is None or recordings == 0:
        raise NothingRecordedError("no step has enqueued a readback since the last next()")
    return graph.next(timeout)
