"""The queues page's bar charts, drawn as SVG by the template (no chart library).

One bar per minute, succeeded below and failed on top, with labelled axes
(minutes ago; jobs per minute, from 0 to the peak), a legend beside it in the
page, and each minute's values on hover (an SVG ``<title>``).
"""

from __future__ import annotations

import datetime as dt
import typing as t

#: The whole drawing, in SVG user units.
WIDTH = 300
HEIGHT = 84
#: The plot area inside it: room on the left for the count axis and below
#: for the time axis.
LEFT = 30
TOP = 6
PLOT_WIDTH = WIDTH - LEFT - 4
PLOT_HEIGHT = 56


def chart(
    succeeded: list[int], failed: list[int], start: dt.datetime | None = None
) -> dict[str, t.Any]:
    """Stacked bars, one per minute from ``start`` (UTC), the current one last.

    Returns the geometry the template draws: ``width``, ``height``, ``plot``
    (the area's ``left``, ``top``, ``right``, ``bottom``), ``bars`` (``x``,
    ``width``, ``ok_y``, ``ok_height``, ``failed_y``, ``failed_height``,
    ``title``), ``y_ticks`` and ``x_ticks`` (``x`` or ``y``, ``label``),
    ``peak``, ``total`` and ``failed``.
    """
    peak = max((ok + bad for ok, bad in zip(succeeded, failed, strict=True)), default=0)
    minutes = len(succeeded)
    slot = PLOT_WIDTH / max(1, minutes)
    bottom = TOP + PLOT_HEIGHT
    bars = []
    for index, (ok, bad) in enumerate(zip(succeeded, failed, strict=True)):
        ok_height = PLOT_HEIGHT * ok / peak if peak else 0.0
        failed_height = PLOT_HEIGHT * bad / peak if peak else 0.0
        when = _minute_label(start, index, minutes)
        bars.append(
            {
                "x": round(LEFT + index * slot, 2),
                "width": round(max(1.0, slot - 1), 2),
                "ok_y": round(bottom - ok_height, 2),
                "ok_height": round(ok_height, 2),
                "failed_y": round(bottom - ok_height - failed_height, 2),
                "failed_height": round(failed_height, 2),
                "title": f"{when}: {ok} succeeded, {bad} failed",
            }
        )
    y_ticks = [{"y": bottom, "label": "0"}]
    if peak:
        y_ticks.append({"y": TOP, "label": str(peak)})
        if peak >= 4:
            y_ticks.append({"y": TOP + PLOT_HEIGHT / 2, "label": f"{peak / 2:g}"})
    x_ticks = [
        {"x": round(LEFT + (minutes - ago) * slot, 2), "label": label}
        for ago, label in (
            (minutes, f"-{minutes} min"),
            (minutes // 2, f"-{minutes // 2}"),
            (0, "now"),
        )
        if minutes
    ]
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "plot": {
            "left": LEFT,
            "top": TOP,
            "right": LEFT + PLOT_WIDTH,
            "bottom": bottom,
        },
        "bars": bars,
        "y_ticks": y_ticks,
        "x_ticks": x_ticks,
        "peak": peak,
        "total": sum(succeeded) + sum(failed),
        "failed": sum(failed),
    }


def _minute_label(start: dt.datetime | None, index: int, minutes: int) -> str:
    """``HH:MM UTC`` of bar ``index``, or how many minutes ago without a start."""
    if start is None:
        return f"{minutes - index} min ago"
    return f"{start + dt.timedelta(minutes=index):%H:%M} UTC"
