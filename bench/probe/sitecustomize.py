"""Instruments a server process for benchmarks, without changing its code: put this directory
on the server's PYTHONPATH and set GW_PROBE_DIR (a directory both processes can see).

- GW_PROBE_TRACEMALLOC=N: `tracemalloc.start(N)` before anything is imported.
- GW_PROBE_GC=1: time spent in each generation's collections (`gc.callbacks`).

A daemon thread then answers requests dropped into GW_PROBE_DIR (the answer appears once
complete, written under a temporary name first):
- `<label>.snap`: a tracemalloc snapshot, after a collection, into `<label>.tm`;
- `<label>.gc`: the collector's figures (collections, seconds, objects freed), `<label>.json`;
- `<label>.garbage`: what the collector frees over 2 s, counted by type, `<label>.json`;
- `<label>.types`: the collector's objects by type, count and shallow size, `<label>.json`;
- `<label>.waiters`: how many long-polls wait (suspended `intake.get`), `<label>.json`;
- `<label>.trim`: a collection, then glibc's `malloc_trim(0)`, `<label>.json`;
- `<label>.writer`: the store writer's batches committed so far, `<label>.json`.
Used by bench/waiter_memory.py; nothing here runs unless GW_PROBE_DIR is set.
"""

from __future__ import annotations

import os

_DIR = os.environ.get("GW_PROBE_DIR")

if _DIR:
    import contextlib
    import gc
    import json
    import threading
    import time
    import tracemalloc
    from pathlib import Path

    _frames = int(os.environ.get("GW_PROBE_TRACEMALLOC", "0") or 0)
    if _frames:
        tracemalloc.start(_frames)

    _runs = [0, 0, 0]
    _seconds = [0.0, 0.0, 0.0]
    _freed = [0, 0, 0]
    _gc = {"collections": _runs, "seconds": _seconds, "collected": _freed}
    _started = [0.0]

    def _on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            _started[0] = time.perf_counter()
            return
        generation = info["generation"]
        _runs[generation] += 1
        _seconds[generation] += time.perf_counter() - _started[0]
        _freed[generation] += info.get("collected", 0)

    if os.environ.get("GW_PROBE_GC"):
        gc.callbacks.append(_on_gc)

    def _answer(path: Path) -> None:
        if path.suffix == ".snap" and tracemalloc.is_tracing():
            target = path.with_suffix(".tm")
            gc.collect()  # what is only waiting to be collected is not held
            tracemalloc.take_snapshot().dump(str(target) + ".tmp")
        elif path.suffix == ".gc":
            target = path.with_suffix(".json")
            figures = dict(
                _gc,
                count=gc.get_count(),
                threshold=gc.get_threshold(),
                frozen=gc.get_freeze_count(),
                enabled=gc.isenabled(),
            )
            Path(str(target) + ".tmp").write_text(json.dumps(figures))
        elif path.suffix == ".types":
            # Objects the collector tracks (containers: no str, bytes or int), by type: count
            # and shallow size (sys.getsizeof), after a collection.
            import collections
            import sys

            target = path.with_suffix(".json")
            gc.collect()
            counts: collections.Counter[str] = collections.Counter()
            sizes: collections.Counter[str] = collections.Counter()
            for o in gc.get_objects():
                kind = f"{type(o).__module__}.{type(o).__qualname__}"
                counts[kind] += 1
                with contextlib.suppress(Exception):  # a broken __sizeof__ counts nothing
                    sizes[kind] += sys.getsizeof(o)
            Path(str(target) + ".tmp").write_text(json.dumps({"counts": counts, "sizes": sizes}))
        elif path.suffix == ".waiters":
            # How many long-polls wait now: suspended `gateway.intake.get` coroutines (the
            # gateway's own registry was made at start-up, and gc.freeze() hides it).
            target = path.with_suffix(".json")
            waiting = sum(
                1
                for o in gc.get_objects()
                if type(o).__name__ == "coroutine"
                and o.cr_code.co_name == "get"
                and o.cr_code.co_filename.endswith("gateway/intake.py")
                and o.cr_frame is not None
                and o.cr_running is False
                and o.cr_await is not None
            )
            Path(str(target) + ".tmp").write_text(json.dumps({"waiting": waiting}))
        elif path.suffix == ".writer":
            # The store's group-committing writer, found through its threads: batches so far.
            target = path.with_suffix(".json")
            writers = {
                id(w): w
                for t in threading.enumerate()
                if t.name.startswith("db-writer")
                and (w := getattr(getattr(t, "_target", None), "__self__", None)) is not None
            }
            batches = sum(getattr(w, "batches", 0) for w in writers.values())
            Path(str(target) + ".tmp").write_text(json.dumps({"batches": batches}))
        elif path.suffix == ".trim":
            # Give freed memory back to the system (collect, then glibc's malloc_trim).
            import ctypes

            target = path.with_suffix(".json")
            gc.collect()
            trimmed = ctypes.CDLL("libc.so.6").malloc_trim(0)
            Path(str(target) + ".tmp").write_text(json.dumps({"trimmed": trimmed}))
        elif path.suffix == ".garbage":
            # What the collector frees (reference cycles) over 2 s: kept and counted by type.
            target = path.with_suffix(".json")
            gc.collect()
            gc.set_debug(gc.DEBUG_SAVEALL)
            time.sleep(2.0)
            gc.collect()
            gc.set_debug(0)
            import collections

            kinds = collections.Counter(
                f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.garbage
            )
            gc.garbage.clear()
            Path(str(target) + ".tmp").write_text(json.dumps(kinds.most_common(40)))
        else:
            return
        path.unlink(missing_ok=True)
        os.replace(str(target) + ".tmp", target)

    _KINDS = ("snap", "gc", "garbage", "types", "waiters", "trim", "writer")

    def _watch(folder: Path) -> None:
        while True:
            requests = [p for kind in _KINDS for p in sorted(folder.glob(f"*.{kind}"))]
            for path in requests:
                try:
                    _answer(path)
                except Exception as error:  # a probe must never take the server down
                    Path(str(path) + ".error").write_text(repr(error))
                    path.unlink(missing_ok=True)
            time.sleep(0.2)

    threading.Thread(target=_watch, args=(Path(_DIR),), name="gw-probe", daemon=True).start()
