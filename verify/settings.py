"""The threshold and box a command judges with, where each came from, and what they imply.

`explain`, `certify` and `check` take each setting from the first of:

1. a flag: `--threshold`; `--domain FILE` or `--lower`/`--upper` (`flag_domain`) — or, in Python,
   the caller's argument (`cardinal.verify.testing.assert_explanations`);
2. for `check`, the explanations file: `explain` records the `threshold` and `domain` it used on
   every line, so `check` judges a file under the settings its explanations were computed with. A
   flag that differs from them is obeyed, with a warning (a valid explanation judged at another
   threshold looks invalid); lines that record different settings need the flag;
3. the network file's metadata (`threshold`, `domain`);
4. the default: threshold 0, the box [0, 1]^n.

**A radius.** `--radius R` (one number, or one per feature as a comma list) gives every input
its own box, the ball `Domain.ball(x, R)`: the largest box of doubles inside the box above and
the exact `[x − R, x + R]` (docs/semantics.md). For `check`
it may also come from the explanations file (explain records `radius` on every line); a flag that
differs from it is obeyed with a warning. Records carry the box above as `domain` and `radius`
beside it: a row's box is the ball, which that rule gives exactly from x, `domain` and `radius`.

`--binary` makes whichever box binary. The command says on stderr which threshold and box it used
whenever they came from the explanations file or the metadata, and all three commands record both
on every output line (`Settings.to_json`).

**A constant prediction.** When an exact enclosure of f over the whole box lies on one side of the
threshold, every prediction is the same: no contrastive explanation exists for any input, and the
empty set is every abductive one. That is nearly always a threshold meant for another output
scale — a sigmoid output, whose values lie in (0, 1), under the default threshold 0 — so it is
said on stderr and in every record (`constant_note`). The enclosure is interval arithmetic in
exact rationals (`ExactNetwork.output_range`): sound for every network, tight on monotone ones;
where it straddles the threshold nothing is said, though the prediction may still be constant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from cardinal.domain import Domain, Radius
from cardinal.errors import InputError
from cardinal.exact import ExactNetwork
from cardinal.io import read_json
from cardinal.network import Network
from cardinal.prediction import threshold_for

CONSTANT = "constant prediction"  # how the note of a constant prediction begins (summaries count them)
# Output activations whose values lie in a fixed range, named in the hint of a constant prediction.
_BOUNDED = {"sigmoid": "(0, 1)", "tanh": "(-1, 1)", "step": "{0, 1}"}


@dataclass(frozen=True)
class Flags:
    """What the caller said about the settings (None: not given): the command line's flags
    (`--domain`/`--lower`/`--upper` read by `flag_domain`), or a Python caller's arguments."""

    threshold: float | None = None
    domain: Domain | None = None
    binary: bool = False
    radius: Radius | None = None


@dataclass(frozen=True)
class Recorded:
    """The settings an explanations file records, each distinct value with the first line giving it."""

    path: str
    thresholds: tuple[tuple[float, int], ...] = ()
    domains: tuple[tuple[Domain, int], ...] = ()
    radii: tuple[tuple[tuple[float, ...], int], ...] = ()  # each radius as one number (1-tuple) or n

    @classmethod
    def of(
        cls, path: str, lines: Sequence[tuple[int, float | None, Domain | None, tuple[float, ...] | None]]
    ) -> Recorded:
        """From (line, threshold, domain, radius — each None where the line records none) per line."""
        thresholds: dict[float, int] = {}
        domains: list[tuple[Domain, int]] = []
        radii: dict[tuple[float, ...], int] = {}
        for line, threshold, domain, radius in lines:
            if threshold is not None:
                thresholds.setdefault(threshold, line)
            if domain is not None and not any(domain.same_as(seen) for seen, _ in domains):
                domains.append((domain, line))
            if radius is not None:
                radii.setdefault(radius, line)
        return cls(path, tuple(thresholds.items()), tuple(domains), tuple(radii.items()))


@dataclass(frozen=True)
class Settings:
    """The threshold and box a command uses, where each came from ("--threshold" or "flags",
    a file's path, "NET's metadata", "default"), and the notes a user must see (a mismatch with
    the explanations file, a constant prediction)."""

    threshold: float
    domain: Domain
    threshold_from: str
    domain_from: str
    notes: tuple[str, ...] = ()
    radius: np.ndarray | None = None  # [n]; None: every input ranges over `domain` itself
    radius_from: str = "default"

    def to_json(self) -> dict[str, Any]:
        """The fields every output line of explain, certify and check carries (`radius` only
        where one is set: one number when all features share it)."""
        line: dict[str, Any] = {"threshold": self.threshold, "domain": self.domain.to_json(compact=True)}
        if self.radius is not None:
            line["radius"] = radius_json(self.radius)
        return line

    def box(self, x: np.ndarray) -> Domain:
        """The box input x [n] ranges over: its ball when a radius is set, else `domain`."""
        return self.domain if self.radius is None else self.domain.ball(x, self.radius)

    def announcements(self) -> list[str]:
        """Lines for stderr: the settings that came from neither a flag nor the defaults (the notes
        are said apart, as warnings)."""
        said = []
        if self.threshold is not None and self.threshold_from not in ("--threshold", "default"):
            said.append(f"threshold {self.threshold!r} (from {self.threshold_from})")
        if self.domain_from not in ("flags", "default"):
            said.append(f"domain {self.domain.describe()} (from {self.domain_from})")
        if self.radius is not None and self.radius_from != "--radius":
            said.append(f"radius {radius_json(self.radius)!r} (from {self.radius_from})")
        return [f"using {', '.join(said)}"] if said else []


def resolve(net: Network, network_path: str, flags: Flags, recorded: Recorded | None = None) -> Settings:
    """The settings of a command (module docstring), checked against the network."""
    recorded = recorded or Recorded("")
    threshold, threshold_from, notes = _threshold(net, network_path, flags, recorded)
    domain, domain_from, more = _domain(net, network_path, flags, recorded)
    radius, radius_from, radius_notes = _radius(domain, flags, recorded)
    constant = constant_note(net, domain, threshold)
    notes = (*notes, *more, *radius_notes, *([constant] if constant else []))
    return Settings(threshold, domain, threshold_from, domain_from, notes, radius, radius_from)


def radius_json(radius: np.ndarray) -> float | list[float]:
    """A radius [n] as a record writes it: one number when every feature shares it."""
    return float(radius[0]) if bool((radius == radius[0]).all()) else radius.tolist()


def _radius(domain: Domain, flags: Flags, recorded: Recorded) -> tuple[np.ndarray | None, str, list[str]]:
    """(radius [n] or None, where it came from, notes): the flag, else the one the explanations
    file records (lines that record different ones need the flag), else none."""
    found = recorded.radii
    if flags.radius is not None:
        radius = domain.radius(flags.radius, "--radius")
        if domain.binary:
            domain.ball(domain.lower, radius, "--radius")  # refused: a binary box has no ball
        notes = [
            f"{recorded.path} line {line} records radius {list(value) if len(value) > 1 else value[0]!r}, which its "
            f"explanations were computed with; judging them at --radius as asked"
            for value, line in found
            if not np.array_equal(np.broadcast_to(np.array(value), radius.shape), radius)
        ]
        return radius, "--radius", notes[:1]
    if len(found) > 1:
        (_, line_a), (_, line_b) = found[:2]
        raise InputError(
            f"{recorded.path}: lines {line_a} and {line_b} record different radii: pass --radius to say which to judge with"
        )
    if found:
        value, line = found[0]
        return domain.radius(value if len(value) > 1 else value[0], f"{recorded.path} line {line}: radius"), recorded.path, []
    return None, "default", []


def _threshold(net: Network, network_path: str, flags: Flags, recorded: Recorded) -> tuple[float | None, str, list[str]]:
    """(threshold, where it came from, notes); no threshold (None) for a network of K ≥ 2
    outputs, where any given one is refused (`cardinal.prediction.threshold_for`)."""
    if net.n_outputs > 1:
        threshold_for(net.n_outputs, flags.threshold, "--threshold")
        threshold_for(net.n_outputs, net.metadata.threshold, f"{network_path}: metadata.threshold")
        for value, line in recorded.thresholds:
            threshold_for(net.n_outputs, value, f"{recorded.path} line {line}: threshold")
        return None, f"none ({net.n_outputs} outputs: the class of the largest)", []
    found = recorded.thresholds
    if flags.threshold is not None:
        notes = [
            f"{recorded.path} line {line} records threshold {value!r}, which its explanations were computed with; "
            f"judging them at --threshold {flags.threshold!r} as asked"
            for value, line in found
            if value != flags.threshold
        ]
        return flags.threshold, "--threshold", notes[:1]
    if len(found) > 1:
        (a, line_a), (b, line_b) = found[:2]
        raise InputError(
            f"{recorded.path}: line {line_a} records threshold {a!r} and line {line_b} threshold {b!r}: "
            "pass --threshold to say which to judge with"
        )
    if net.metadata.threshold is not None:
        fallback = net.metadata.threshold, f"{network_path}'s metadata"
    else:
        fallback = 0.0, "default"
    if found and found[0][0] != fallback[0]:  # the file's own threshold, where it changes something
        return found[0][0], recorded.path, []
    return (*fallback, [])


def _domain(net: Network, network_path: str, flags: Flags, recorded: Recorded) -> tuple[Domain, str, list[str]]:
    """(domain, where it came from, notes)."""
    found = recorded.domains
    if flags.domain is not None:
        if flags.domain.n != net.n_inputs:
            raise InputError(f"the domain has {flags.domain.n} features, the network has {net.n_inputs} inputs")
        domain, source = flags.domain, "flags"
    elif len(found) > 1:
        (_, line_a), (_, line_b) = found[:2]
        raise InputError(
            f"{recorded.path}: lines {line_a} and {line_b} record different domains: pass --domain or --lower/--upper "
            "to say which to judge with"
        )
    else:
        if net.metadata.domain is not None:
            domain = Domain.from_json(net.metadata.domain, source=f"{network_path}: metadata.domain")
            source = f"{network_path}'s metadata"
        else:
            domain, source = Domain.unit(net.n_inputs), "default"
        if found and not found[0][0].same_as(domain):  # the file's own domain, where it changes something
            domain, source = found[0][0], recorded.path
    if flags.binary and not domain.binary:
        domain = Domain(domain.lower, domain.upper, binary=True)
    notes = [
        f"{recorded.path} line {line} records another domain ({seen.describe()}) than the one judged with "
        f"({domain.describe()}, as the flags say)"
        for seen, line in found
        if not seen.same_as(domain)
    ]
    return domain, source, notes[:1]


def flag_domain(
    net: Network, domain_file: str | None, lower: float | list[float] | None, upper: float | list[float] | None
) -> Domain | None:
    """The box of `--domain FILE` or `--lower`/`--upper` (the other one defaults to 0 or 1), checked
    against the network; None when none of them is given."""
    if domain_file is None and lower is None and upper is None:
        return None
    if domain_file is None:
        return Domain.broadcast(0.0 if lower is None else lower, 1.0 if upper is None else upper, net.n_inputs)
    if lower is not None or upper is not None:
        raise InputError("give either --domain or --lower/--upper, not both")
    domain = Domain.from_json(read_json(domain_file, "domain file"), source=domain_file)
    if domain.n != net.n_inputs:
        raise InputError(f"{domain_file}: domain has {domain.n} features, the network has {net.n_inputs} inputs")
    return domain


def constant_note(net: Network, domain: Domain, threshold: float | None) -> str | None:
    """A note when the prediction of a one-output network is provably the same on the whole box
    (module docstring), else None (always for K ≥ 2 outputs, which have no threshold)."""
    if net.n_outputs != 1 or threshold is None:
        return None
    enclosure = ExactNetwork(net).output_range(domain.lower, domain.upper)
    prediction = enclosure.predict(Fraction(threshold))
    if prediction is None:
        return None
    side = "above" if prediction == 1 else "at or below"
    note = (
        f"{CONSTANT}: f stays within [{float(enclosure.lower):.6g}, {float(enclosure.upper):.6g}] on the whole "
        f"box (exact interval bound), {side} the threshold {threshold!r}, so every prediction is {prediction}: no "
        "contrastive explanation exists and the empty set is every abductive one"
    )
    output = net.layers[-1].activation.name
    where = f"the output layer is {output}, whose values lie in {_BOUNDED[output]}: " if output in _BOUNDED else ""
    return f"{note}; {where}choose a threshold inside f's range (--threshold, or metadata.threshold in the network file)"
