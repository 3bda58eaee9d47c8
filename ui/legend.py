"""Legend entries that say where a hidden line is: a series drawn exactly on top of another cannot be
seen, so its name says which one it lies under."""

from __future__ import annotations

import pandas as pd


def name_hidden(df: pd.DataFrame, series: str, x: str, y: str | None = None) -> pd.DataFrame:
    """``df`` with each series whose points (x, and y if given) are exactly those of an earlier series
    renamed "<name> (under <earlier name>)", the earlier series in the frame's order."""
    if df.empty:
        return df
    cols = [x] if y is None else [x, y]
    seen: dict[tuple, str] = {}
    rename: dict[str, str] = {}
    for name, part in df.groupby(series, sort=False):
        key = tuple(map(tuple, part[cols].sort_values(cols).itertuples(index=False, name=None)))
        if key in seen:
            rename[name] = f"{name} (under {seen[key]})"
        else:
            seen[key] = name
    if not rename:
        return df
    out = df.copy()
    out[series] = out[series].map(lambda s: rename.get(s, s))
    return out
