"""Rule conditions: a rule's `when`, a CEL expression (the Common Expression Language of
Kubernetes admission policies and Envoy) over the request, compiled when the config loads.

What an expression can see (`Facts`): `fn`, `kwargs`, `run_id`, `kind` ("function_call" or
"human_contact"), `project`, `key` (the API key's name) and `state` (`{}` when the agent sent
none). A bad expression is refused at load with its position; so is one over the cost limit.
At a create, an evaluation error (a missing key, a type mismatch) or a result that is not
true means "does not match": no request is ever decided by an error. Each rule logs its first
evaluation error, once per process.

The binding, `common-expression-language` (Rust), compiles in ~15 µs and evaluates a rule in
a few µs against a context built once per create (~30 µs with `matches()`, whose regex it
compiles on every call: bench/rules.py); cel-python took ~180 µs per evaluation.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `import cel` costs ~0.2 s (its package imports a CLI): only when used
    import cel

log = logging.getLogger(__name__)

NAMES = ("fn", "kwargs", "run_id", "kind", "project", "key", "state")
MAX_LENGTH = 4000  # characters of one expression
# The cost of an expression: its tokens, times LIST_BOUND for each comprehension level
# (all/exists/exists_one/map/filter) nested in another. One level over a list of the
# request's is fine; a comprehension inside a comprehension is quadratic and refused.
LIST_BOUND = 100
MAX_COST = 100_000
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
# The functions the binding has (operators are named "_&&_", "@in", "!_"...). Checked at
# load: a misspelt function ("startswith") would otherwise fail every evaluation, and a rule
# that never matches looks just like one that holds.
_STANDARD = """
    size contains startsWith endsWith matches int uint double string bytes duration timestamp
    type dyn has all exists exists_one map filter getFullYear getMonth getDate getDayOfMonth
    getDayOfWeek getDayOfYear getHours getMinutes getSeconds getMilliseconds
"""
FUNCTIONS = frozenset(_STANDARD.split())
# Type names an expression may compare with: `type(kwargs.amount) == int`.
TYPES = frozenset({"int", "uint", "double", "string", "bytes", "bool", "list", "map", "type"})
_TOKEN = re.compile(
    r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|\w+|\S'
)
_BOUND = re.compile(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_]\w*)\s*,")
_POSITION = re.compile(r"<input>:(\d+):(\d+): (.*)")


class BadExpression(ValueError):
    """An expression that cannot be a rule's `when`; says where and what is wrong."""


def _cel() -> Any:
    import cel  # here, not at the top: see TYPE_CHECKING above

    return cel


@dataclass
class Facts:
    """One request, as rule expressions see it; the CEL context is built once per create."""

    kind: str
    fn: str
    run_id: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    project: str = "default"
    key: str = ""
    state: dict[str, Any] = field(default_factory=dict)
    _context: cel.Context | None = field(default=None, init=False, repr=False)
    _given: set[str] = field(default_factory=set, init=False, repr=False)

    def variables(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in NAMES}

    def context(self, names: frozenset[str]) -> cel.Context:
        """A context with (at least) these variables, shared by every rule of one create: a
        large `state` is converted only when an expression reads it."""
        context = self._context = self._context or _cel().Context()
        for name in names - self._given:
            context.add_variable(name, getattr(self, name))
            self._given.add(name)
        return context


class Condition:
    """A compiled `when`."""

    def __init__(self, rule: str, source: str) -> None:
        self.rule = rule
        self.source = source
        self.program = _compile(source)
        self.names = frozenset(self.program.references()["variables"]) & frozenset(NAMES)
        self._logged = False

    def __repr__(self) -> str:
        return f"Condition({self.rule!r}, {self.source!r})"

    def holds(self, facts: Facts) -> bool:
        """True only when the expression evaluates to true."""
        try:
            result = self.program.execute(facts.context(self.names))
        except Exception as error:  # the binding raises Key/Type/Runtime/ValueError and more
            self._log_once(f"{type(error).__name__}: {_first_line(error)}")
            return False
        if not isinstance(result, bool):
            self._log_once(f"it gave {type(result).__name__} {result!r}, not true or false")
            return False
        return result

    def explain(self, facts: Facts) -> str:
        """What the expression made of these facts, in words (`gateway rules test`)."""
        try:
            result = self.program.execute(facts.context(self.names))
        except Exception as error:
            return f"evaluation error ({_first_line(error)}): does not match"
        if result is True:
            return "true"
        shown = "false" if result is False else f"{result!r}, not true or false"
        return f"{shown}: does not match"

    def _log_once(self, what: str) -> None:
        if not self._logged:
            self._logged = True
            log.warning(
                "rule %s: its `when` could not be evaluated (%s): no match", self.rule, what
            )


def _compile(source: str) -> Any:
    if len(source) > MAX_LENGTH:
        raise BadExpression(f"it is {len(source)} characters long; the limit is {MAX_LENGTH}")
    try:
        program = _cel().compile(source)
    except ValueError as error:
        raise BadExpression(_parse_error(str(error))) from None
    spent = cost(source)
    if spent > MAX_COST:
        raise BadExpression(
            f"its estimated cost is {spent:,}, over the limit of {MAX_COST:,} "
            "(a comprehension inside a comprehension, or too long)"
        )
    references = program.references()
    bound = set(_BOUND.findall(source))
    for name in references["variables"]:
        if name not in NAMES and name not in bound and name not in TYPES:
            raise BadExpression(f"unknown name {name!r} at {_where(source, name)}; {_known()}")
    for name in references["functions"]:
        if name[:1].isalpha() and name not in FUNCTIONS:
            raise BadExpression(f"unknown function {name!r} at {_where(source, name)}")
    _dry_run(program)
    return program


def _dry_run(program: Any) -> None:
    """Evaluate once over an empty request: a constant that is not true or false shows."""
    empty = Facts(kind="function_call", fn="", run_id="")
    try:
        result = program.execute(empty.variables())
    except Exception:  # e.g. a key the empty request lacks: only real requests can tell
        return
    if not isinstance(result, bool):
        raise BadExpression(f"it gives {type(result).__name__}, not true or false")


def cost(source: str) -> int:
    """Tokens x LIST_BOUND per nesting level of comprehensions (see MAX_COST)."""
    tokens = _TOKEN.findall(source)
    opened: list[bool] = []  # per open parenthesis: whether it starts a comprehension
    depth = deepest = 0  # comprehension levels
    for i, token in enumerate(tokens):
        if token == "(":
            macro = i >= 2 and tokens[i - 1] in _MACROS and tokens[i - 2] == "."
            opened.append(macro)
            depth += macro
            deepest = max(deepest, depth)
        elif token == ")" and opened:
            depth -= opened.pop()
    return len(tokens) * int(LIST_BOUND**deepest)


def _parse_error(message: str) -> str:
    """The binding's "ERROR: <input>:1:7: Syntax error: ..." plus its caret lines, as
    "line 1, column 7: syntax error: ..." plus the caret lines."""
    found = _POSITION.search(message)
    if found is None:
        return message
    line, column, what = found.groups()
    what = re.sub(r" expecting \{.*", "", what)  # the parser's list of every token it wanted
    caret = "\n".join(message[found.end() :].splitlines()[1:3])  # "| source" and "| ...^"
    return f"line {line}, column {column}: {what[:1].lower()}{what[1:]}\n{caret}".rstrip()


def _where(source: str, name: str) -> str:
    found = re.search(rf"(?<![\w.]){re.escape(name)}\b", source) or re.search(
        rf"\b{re.escape(name)}\b", source
    )
    start = found.start() if found else 0
    line = source.count("\n", 0, start) + 1
    column = start - (source.rfind("\n", 0, start) + 1) + 1
    return f"line {line}, column {column}"


def _known() -> str:
    return "an expression sees " + ", ".join(NAMES)


def _first_line(error: BaseException) -> str:
    """The error's first sentence (the binding appends advice on CEL's typing rules)."""
    text = str(error).strip().splitlines()
    return text[0].split(". ")[0][:200] if text else type(error).__name__
