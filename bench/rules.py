"""Rules: what the routing config's rules cost per create, with and without a CEL `when`.

    cd /work/main && .venv/bin/python -m bench.rules [--seconds 3] [--max-count 300000] [--quick]

In-process, no server: each simulated create builds a fresh `Facts` from one function call
(`wire_money`, amount 12000, as `gateway.intake.facts` does) and calls
`gateway.policies.plans.plan` with it. Every case plans the same targets (the matching rule's
`team:payments`, or the API key's `team:payments` when no rule matches), so the cases differ
only in the rules scanned. Cases, interleaved in rounds so a noisy moment costs each alike:

- baseline: a config with no rules;
- 50 glob rules: `fn` patterns that do not match (rules as they were before `when`);
- 50 `when` rules, the last matching: all 50 expressions are evaluated (worst case);
- 50 `when` rules, the first matching (best case);
- 50 `when` rules that raise (extra): `kwargs.path` on a call without one, so every
  evaluation is an error, which means "does not match".

Also, once per run: loading a config (`RoutingConfig.model_validate`) with 50 `when` rules
(the first load in this process includes `import cel`), and `import cel` in a fresh
interpreter. Prints p50/p99 and the ratio to the baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from gateway.conditions import Facts
from gateway.policies.plans import Plan, plan
from gateway.routing import RoutingConfig

RULES = 50
ROUNDS = 5  # each case runs in this many slices, interleaved with the others
WARMUP = 200  # creates per case before the first round, not counted
TARGET = "team:payments"

FN = "wire_money"
KWARGS: dict[str, Any] = {
    "amount": 12000,
    "to": "DE89370400440532013000",
    "memo": "Invoice 2024-117: consulting services, March",
}
MATCHING_WHEN = f'fn == "{FN}" && kwargs.amount > 10000'

# None of these holds for the call above; they use the operators an operator would.
WHEN_TEMPLATES = (
    'fn == "op_{i}" && kwargs.amount > 10000',
    'kwargs.amount > {big} && fn.startsWith("wire")',
    'has(kwargs.path) && kwargs.path.startsWith("/srv/{i}/")',
    'kwargs.to.startsWith("GB{i:02d}")',
    "size(kwargs.memo) > {long}",
    'kwargs.to in ["FR{i}01", "IT{i}02", "ES{i}03"]',
    'kwargs.memo.matches("(?i)^urgent.*{i}$")',
    'project == "team-{i}" && key.startsWith("ci-")',
    'run_id.startsWith("nightly-{i}") || kind == "human_contact"',
)


def when_rule(i: int) -> str:
    template = WHEN_TEMPLATES[i % len(WHEN_TEMPLATES)]
    return template.format(i=i, big=100_000 + i, long=400 + i)


def config_data(rules: list[dict[str, Any]]) -> dict[str, Any]:
    """A small realistic config: two people, one Slack team every rule targets."""
    return {
        "people": {
            "ana": {"slack": "U01ANA", "email": "ana@example.test"},
            "ben": {"slack": "U01BEN", "email": "ben@example.test"},
        },
        "teams": {"payments": {"members": ["ana", "ben"], "slack_channel": "C0PAYMENTS"}},
        "rules": rules,
    }


def glob_rules() -> list[dict[str, Any]]:
    return [{"fn": f"op_{i}_*", "target": TARGET} for i in range(1, RULES + 1)]


def when_rules(matching_at: int | None) -> list[dict[str, Any]]:
    """50 named `when` rules; the one at index `matching_at` (if any) matches the call."""
    rules = []
    for index in range(RULES):
        when = MATCHING_WHEN if index == matching_at else when_rule(index + 1)
        rules.append({"name": f"r{index + 1}", "when": when, "target": TARGET})
    return rules


def raising_rules() -> list[dict[str, Any]]:
    return [
        {"name": f"e{i}", "when": f'kwargs.path.startsWith("/srv/{i}/")', "target": TARGET}
        for i in range(1, RULES + 1)
    ]


def new_facts() -> Facts:
    """A fresh Facts per create, as `gateway.intake.facts` builds one."""
    return Facts(
        kind="function_call",
        fn=FN,
        run_id="payouts-2026-11-23",
        kwargs=dict(KWARGS),
        project="default",
        key="payments agent",
        state={},
    )


def create(config: RoutingConfig) -> Plan:
    return plan(
        config,
        channel=None,
        facts=new_facts(),
        key_target=TARGET,
        project=None,
        project_target=None,
    )


@dataclass
class Case:
    label: str
    config: RoutingConfig
    expected_rule: str | None  # the label of the rule that must match, as a sanity check
    latencies: list[float] = field(default_factory=list)  # seconds per create

    def check(self) -> None:
        planned = create(self.config)
        if planned.rule_label != self.expected_rule or len(planned.targets) != 1:
            raise SystemExit(
                f"{self.label}: planned {planned.rule_label!r} with {len(planned.targets)} "
                f"target(s), expected {self.expected_rule!r} with 1"
            )

    def run(self, seconds: float, count: int) -> None:
        config, clock, times = self.config, time.perf_counter_ns, self.latencies
        deadline = clock() + int(seconds * 1e9)
        for _ in range(count):
            started = clock()
            create(config)
            ended = clock()
            times.append((ended - started) / 1e9)
            if ended > deadline:
                break


def cases() -> list[Case]:
    def load(rules: list[dict[str, Any]]) -> RoutingConfig:
        return RoutingConfig.model_validate(config_data(rules))

    return [
        Case("baseline: 0 rules", load([]), None),
        Case(f"{RULES} glob rules, none matching", load(glob_rules()), None),
        Case(f"{RULES} when rules, last matching", load(when_rules(RULES - 1)), f"rule r{RULES}"),
        Case(f"{RULES} when rules, first matching", load(when_rules(0)), "rule r1"),
        Case(f"{RULES} when rules, each raising (extra)", load(raising_rules()), None),
    ]


def load_ms(data: dict[str, Any]) -> float:
    started = time.perf_counter()
    RoutingConfig.model_validate(data)
    return common.ms(time.perf_counter() - started)


def measure_loads(repeats: int) -> None:
    """Config load: the first (with `import cel`), then warm loads of 0/50 glob/50 when."""
    data = config_data(when_rules(RULES - 1))
    imported = "cel" in sys.modules
    first = load_ms(data)
    print(
        f"first config load with {RULES} when rules: {first:.2f} ms "
        f"({'cel already imported' if imported else 'includes import cel'})"
    )
    rows = []
    loads = {
        "0 rules (baseline)": config_data([]),
        f"{RULES} glob rules": config_data(glob_rules()),
        f"{RULES} when rules": data,
    }
    samples = {label: [load_ms(d) for _ in range(repeats)] for label, d in loads.items()}
    base = common.percentile(samples["0 rules (baseline)"], 50)
    for label, values in samples.items():
        p50 = common.percentile(values, 50)
        rows.append(
            [
                f"load: {label}",
                len(values),
                common.fmt(p50, 3),
                common.fmt(common.percentile(values, 99), 3),
                common.ratio(p50, base),
            ]
        )
    print()
    common.print_table(["config load (warm)", "n", "p50 ms", "p99 ms", "p50 vs base"], rows)
    glob50 = common.percentile(samples[f"{RULES} glob rules"], 50)
    when50 = common.percentile(samples[f"{RULES} when rules"], 50)
    per_rule = (when50 - glob50) / RULES * 1000
    print(f"per when rule at load (when - glob, / {RULES}): {per_rule:.1f} µs")


def measure_import(runs: int) -> None:
    """`import cel` in a fresh interpreter, as the gateway's first `when` rule pays it."""
    code = "import time;t=time.perf_counter();import cel;print(time.perf_counter()-t)"
    took = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
            cwd=common.REPO_ROOT,
        )
        took.append(common.ms(float(done.stdout.strip())))
    shown = ", ".join(f"{t:.1f}" for t in took)
    print(
        f"import cel in a fresh interpreter: median {statistics.median(took):.1f} ms "
        f"over {runs} run(s) ({shown} ms)"
    )


def report(measured: list[Case]) -> None:
    base = measured[0]
    base50 = common.percentile(base.latencies, 50)
    base99 = common.percentile(base.latencies, 99)
    rows = []
    for case in measured:
        p50 = common.percentile(case.latencies, 50)
        p99 = common.percentile(case.latencies, 99)
        rows.append(
            [
                case.label,
                len(case.latencies),
                common.fmt(p50 * 1e6, 1),
                common.fmt(p99 * 1e6, 1),
                common.ratio(p50, base50),
                common.ratio(p99, base99),
            ]
        )
    print()
    common.print_table(
        ["per create (Facts + plan)", "n", "p50 µs", "p99 µs", "p50 vs base", "p99 vs base"],
        rows,
    )
    print()
    for case, what in (
        (measured[1], "glob rule"),
        (measured[2], "when rule"),
        (measured[4], "raising when rule"),
    ):
        extra = common.percentile(case.latencies, 50) - base50
        print(
            f"per {what} (p50 of '{case.label}' - baseline p50, / {RULES}): "
            f"{extra / RULES * 1e6:.2f} µs"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per case (default 3)")
    parser.add_argument("--max-count", type=int, default=300_000, help="creates per case, at most")
    parser.add_argument("--loads", type=int, default=30, help="warm config loads of each")
    parser.add_argument("--imports", type=int, default=3, help="fresh `import cel` runs")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 0.3 s per case")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.max_count, args.loads, args.imports = 0.3, 20_000, 5, 1
    # A raising `when` logs once per rule: not what is measured here.
    logging.getLogger("gateway.conditions").setLevel(logging.ERROR)

    print("== rules: evaluation cost per create, in-process ==")
    print(
        f"machine: {os.cpu_count() or 0} CPU core(s), {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.system()} {platform.machine()}; "
        f"{args.seconds:g} s and at most {args.max_count:,} creates per case, "
        f"in {ROUNDS} interleaved rounds"
    )
    print()
    measure_import(args.imports)
    measure_loads(args.loads)

    measured = cases()
    for case in measured:
        case.check()
        case.run(seconds=60, count=WARMUP)
        case.latencies.clear()
    started = time.monotonic()
    for _ in range(ROUNDS):
        for case in measured:
            case.run(args.seconds / ROUNDS, max(args.max_count // ROUNDS, 1))
    report(measured)
    print(f"(creates took {time.monotonic() - started:.1f} s)")


if __name__ == "__main__":
    main()
