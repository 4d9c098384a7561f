"""Load from `wrk` (Debian's package; C, ~24,000 req/s on this machine), so the load generator
is never what a benchmark measures. A Lua script posts function calls with unique call_ids."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Each wrk thread numbers its own requests; the run's nonce keeps call_ids unique across runs.
CREATE_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_API_KEY")
counter = 0
threads = 0
setup = function(thread)
  thread:set("id", threads)
  threads = threads + 1
end
request = function()
  counter = counter + 1
  local body = string.format(
    '{"run_id":"bench","call_id":"%s-%d-%d","spec":{"fn":"send_email","kwargs":' ..
    '{"to":"ops@example.com","subject":"quarterly report","amount":%d}}}',
    os.getenv("BENCH_NONCE"), id, counter, counter)
  return wrk.format(nil, "/humanlayer/v1/function_calls", nil, body)
end
"""

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


@dataclass
class WrkResult:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int  # non-2xx answers, plus socket errors

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else math.nan


def available() -> bool:
    return shutil.which("wrk") is not None


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS[unit]


def parse(output: str) -> WrkResult:
    done = re.search(r"(\d+) requests in ([\d.]+)(s|m)", output)
    if done is None:
        raise RuntimeError(f"wrk printed no result:\n{output}")
    seconds = float(done.group(2)) * (60 if done.group(3) == "m" else 1)
    p50 = re.search(r"50%\s+([\d.]+\w+)", output)
    p99 = re.search(r"99%\s+([\d.]+\w+)", output)
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    socket = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    )
    errors = int(non_2xx.group(1)) if non_2xx else 0
    errors += sum(int(n) for n in socket.groups()) if socket else 0
    return WrkResult(
        requests=int(done.group(1)),
        seconds=seconds,
        p50_ms=_ms(p50.group(1)) if p50 else math.nan,
        p99_ms=_ms(p99.group(1)) if p99 else math.nan,
        errors=errors,
    )


def post_creates(
    url: str, *, connections: int, seconds: float, api_key: str, nonce: str, threads: int = 2
) -> WrkResult:
    """POST unique function calls to `url` for `seconds` from `connections` connections."""
    with tempfile.TemporaryDirectory(prefix="gw-wrk-") as tmp:
        script = Path(tmp) / "create.lua"
        script.write_text(CREATE_SCRIPT)
        env = os.environ | {"BENCH_API_KEY": api_key, "BENCH_NONCE": nonce}
        done = subprocess.run(
            [
                "wrk",
                f"-t{threads}",
                f"-c{connections}",
                f"-d{seconds:g}s",
                "--latency",
                "-s",
                str(script),
                url,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=seconds + 60,
            check=True,
        )
    return parse(done.stdout)
