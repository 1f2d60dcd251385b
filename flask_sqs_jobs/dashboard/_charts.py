"""Small bar charts drawn as SVG rectangles by the template (no chart library)."""

from __future__ import annotations

import typing as t

#: The chart's drawing area, in SVG user units.
WIDTH = 240
HEIGHT = 40


def chart(succeeded: list[int], failed: list[int]) -> dict[str, t.Any]:
    """Stacked bars, one per minute: succeeded below, failed on top.

    Returns ``{"width", "height", "bars": [{"x", "width", "ok_y", "ok_height",
    "failed_y", "failed_height", "title"}], "total", "failed"}``.
    """
    peak = max((ok + bad for ok, bad in zip(succeeded, failed, strict=True)), default=0)
    minutes = len(succeeded)
    slot = WIDTH / max(1, minutes)
    bars = []
    for index, (ok, bad) in enumerate(zip(succeeded, failed, strict=True)):
        ok_height = HEIGHT * ok / peak if peak else 0.0
        failed_height = HEIGHT * bad / peak if peak else 0.0
        bars.append(
            {
                "x": round(index * slot, 2),
                "width": round(max(1.0, slot - 1), 2),
                "ok_y": round(HEIGHT - ok_height, 2),
                "ok_height": round(ok_height, 2),
                "failed_y": round(HEIGHT - ok_height - failed_height, 2),
                "failed_height": round(failed_height, 2),
                "title": f"{minutes - index} min ago: {ok} succeeded, {bad} failed",
            }
        )
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "bars": bars,
        "total": sum(succeeded) + sum(failed),
        "failed": sum(failed),
    }
