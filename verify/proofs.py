"""Certificates beside the results (`--proof DIR` of certify, check and crosscheck) and
`cardinal proof check`.

Every exact "nothing smaller" of a row — its minimum proved (`minimum_proved`: the claim "no
explanation of at most |minimum| − 1 features", which covers an exact backend's `none_within`
and `optimal`) or no contrastive explanation at all (`none_exists`) — is proved again by
`solvers.proof` and written as one `cardinal.proof/1` file (docs/proofs.md), then checked at once
by the independent checker (`cardinal.checker`). The network is written once per folder as
`networks/SHA256.json` (cardinal's JSON), or into each certificate with `embed`.

A result's `proof` entry: `{"file" (`certificate_name`: the record key and the certificate's
SHA-256, so that no two different certificates share a name), "sha256" (of the file's bytes), "problem" (the certificate's
problem: network_sha256, x, lower, upper, binary, threshold, kind), "claim", "bytes", "seconds"
(generation), "check_seconds", "accepted"}` (with `message` when rejected, a bug of the
generator), or `{"file": null, "reason"}` when no certificate was written: nothing to prove (an empty minimum, no exact claim),
the generator's deadline, an undecided judgement, a box-tree search that ends open (its interval
enclosures too loose).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cardinal.solvers.proof import NAME_DIGITS as NAME_DIGITS
from cardinal.solvers.proof import CheckTime, alarm, network_beside, write_certificate
from cardinal.solvers.proof import Written as Written
from cardinal.solvers.proof import certificate_name as certificate_name
from cardinal.solvers.proof import make as make

from cardinal import checker
from cardinal.checker.record import check_record
from cardinal.deadline import SPENT, Deadline
from cardinal.errors import InputError
from cardinal.io import MAX_DATA_BYTES, decode_text, json_lines, parse_json, read_input, read_json
from cardinal.network import Network
from cardinal.problem import Outcome, Problem, Proved, Verdict
from cardinal.validate import output_directory

from .record import proves_none

if TYPE_CHECKING:
    from .certify import RowVerdict


def claim_of(
    problem: Problem, verdict: Verdict, minimum: tuple[int, ...] | None, proved: bool, certified: bool
) -> tuple[int | None, str]:
    """k of the result's exact "nothing smaller" claim (n: no CXp at all), or None and why not
    (`cardinal.problem.Proved.within`, as for one outcome)."""
    none_exists = proves_none(verdict, certified, minimum)
    if not none_exists and (not proved or minimum is None):
        return None, "no exact 'nothing smaller' claim"
    k = Proved(None if minimum is None else len(minimum), none_exists).within(problem.n)
    return (None, "the minimum is the empty set: nothing is smaller") if k is None else (k, "")


def save(folder: Path, written: Written, network: Network, embed: bool = False) -> None:
    """Write a made certificate into `folder` (a folder the user named: nothing below it is written
    through a link), and unless it embeds the network, the network beside it once. A file of
    the certificate's name that holds these very bytes is kept; one that holds anything else is
    never replaced (InputError, one line: a certificate another record may name)."""
    if written.text is None:
        return
    path = folder / written.entry["file"]
    data = written.text.encode()
    try:
        held = None if path.is_symlink() or not path.is_file() else path.read_bytes()
    except OSError:
        held = None
    if held is not None and held != data:
        raise InputError(f"{path}: holds another certificate; cardinal never replaces one (its records name it by SHA-256)")
    write_certificate(written.text, path, None if embed else network, root=folder)


def proof_directory(path: str | Path, flag: str = "--proof") -> Path:
    """The `--proof` folder, checked before any work (`validate.output_directory`), and its
    `networks/` folder, a name of cardinal's: a symbolic link planted there is refused."""
    folder = output_directory(path, flag)
    output_directory(folder / "networks", flag, root=folder)
    return folder


class ProofFolder:
    """Where the certificates of one network's results go (`--proof DIR` of certify and check,
    `proof_dir` of `cardinal.explain`): made and written at once (`make`, `save`) into `folder`,
    or, with `folder` None, held in memory with the network embedded (nothing written; each
    entry's `file` is null). `time_limit`: seconds to search for each certificate."""

    def __init__(self, folder: str | Path | None, network: Network, time_limit: float, embed: bool = False) -> None:
        self.folder = None if folder is None else Path(folder)
        self.network, self.time_limit = network, time_limit
        self.embed = embed or folder is None

    def certify(self, problem: Problem | None, judged: RowVerdict, key: str, deadline: Deadline | None = None) -> Written:
        """The certificate of one result's exact "nothing smaller" (`judged`: its `RowVerdict`;
        `claim_of`), its search started from the solvers' outcomes, written into the folder when
        there is one. `problem` None (p(x) undecided): no certificate, the reason in the entry.
        `deadline` (the call's budget, `cardinal.deadline`): the search gets `time_limit` s or the
        time left when that is less; with none left, no certificate, the reason "no certificate:
        the call's time limit" (the verdict is the solvers', unchanged)."""
        if problem is None:
            return Written({"file": None, "reason": UNDECIDED})
        claim = claim_of(problem, judged.verdict, judged.minimum, judged.minimum_proved, judged.certified)
        limit = self.time_limit if deadline is None else deadline.limit(self.time_limit)
        if claim[0] is not None and limit <= 0:
            return Written({"file": None, "reason": f"no certificate: {SPENT}"})
        return self._kept(make(problem, *claim, key, limit, self.embed, judged.solvers, deadline))

    def write(
        self, problem: Problem, claim: tuple[int | None, str], key: str, outcomes: Mapping[str, Outcome] | None = None
    ) -> dict[str, Any]:
        """The `proof` entry of one result whose claim (k, or None and why: `claim_of`) is given,
        its certificate written when there is one (`make`, with the solvers' `outcomes`)."""
        return self._kept(make(problem, *claim, key, self.time_limit, self.embed, outcomes)).entry

    def _kept(self, written: Written) -> Written:
        """A made certificate written into the folder, or held in memory (no folder): then no file
        names it."""
        if self.folder is not None:
            save(self.folder, written, self.network, self.embed)
        elif written.text is not None:
            written = Written({**written.entry, "file": None}, written.text)
        return written


UNDECIDED = "p(x) is undecided"  # the reason of a result without a problem (exact arithmetic cannot decide p(x))


# ---------------------------------------------------------------------------- cardinal proof check
MAX_CERTIFICATE_BYTES = 64 << 20  # a certificate file (and a network beside it): refused past this size, unread


@dataclass(frozen=True)
class Checked:
    """One certificate file checked: the checker's report, the file's SHA-256 and parsed document,
    and the parsed network document it was checked against (what a record's replay evaluates)."""

    report: checker.Report
    sha256: str
    certificate: dict[str, Any]
    network: Any = None


def check_file(
    path: str | Path,
    network: str | Path | None = None,
    activations: str | None = None,
    time_limit: float | None = None,
    input_shape: tuple[int, ...] | None = None,
) -> Checked:
    """Check one certificate file against `network` (cardinal JSON, read by the checker itself; an
    ONNX or torch file, read by `cardinal.formats` into cardinal's JSON), else the network it
    embeds, else `networks/SHA256.json` beside it (never through a symbolic link: `networks/`
    and the file must be a folder and a file of the certificate's folder). InputError, one line
    naming the file: a file past `MAX_CERTIFICATE_BYTES` (refused before it is read), a file or
    certificate that is not well formed (`checker.CertificateError`), no network, or no verdict
    within `time_limit` seconds (None: no limit) — never an acceptance."""
    path = Path(path)
    data = read_input(path, "certificate", MAX_CERTIFICATE_BYTES)
    certificate = parse_json(decode_text(data, path, "certificate"), str(path))
    document = None
    if network is not None:
        document = _network_document(network, activations, input_shape)
    elif isinstance(certificate, dict) and certificate.get("network") is None:
        problem = certificate.get("problem")
        digest = problem.get("network_sha256") if isinstance(problem, dict) else None
        beside = network_beside(path, digest) if isinstance(digest, str) and digest.isalnum() and len(digest) == 64 else None
        if beside is None or not (beside.is_file() or beside.is_symlink()):
            missing = beside or path.parent / "networks"
            raise InputError(f"{path}: no network: the certificate embeds none and {missing} is missing; give --network NET")
        for step in (beside.parent, beside):
            if step.is_symlink():
                why = "proof check reads no network through a link; give --network NET"
                raise InputError(f"{path}: {step} is a symbolic link: {why}")
        document = read_json(beside, "network file", MAX_CERTIFICATE_BYTES)
    if not isinstance(certificate, dict):
        raise InputError(f"{path}: not a {checker.FORMAT} certificate (a JSON object)")
    try:
        with _limited(time_limit, path):
            report = checker.check(certificate, document)
    except checker.CertificateError as error:
        raise InputError(f"{path}: {error}") from None
    document = document if document is not None else certificate.get("network")
    return Checked(report, hashlib.sha256(data).hexdigest(), certificate, document)


@contextlib.contextmanager
def _limited(seconds: float | None, path: Path) -> Iterator[None]:
    """Run the body within `seconds` (`solvers.proof.alarm`: the main thread of a Unix process;
    elsewhere the body runs unlimited); InputError "PATH: not checked within N s" past it."""
    try:
        with alarm(seconds):
            yield
    except CheckTime:
        raise InputError(f"{path}: not checked within {seconds:g} s (--time-limit)") from None


Named = tuple[str, dict[str, Any], dict[str, Any]]  # where a record is, the record, its `proof` entry


def records_by_file(path: str | Path) -> dict[str, list[Named]]:
    """The `--records` file (JSON lines of certify, check, crosscheck or `Explanation.to_dict()`):
    per certificate file name, the records that name it (crosscheck's records of one input with
    the same claim share one certificate), each as where it is ("RECORDS line N (key or row,
    kind)"), the record and its `proof` entry. InputError: a line that is not an object."""
    found: dict[str, list[Named]] = {}
    data = read_input(path, "records file", MAX_DATA_BYTES)
    for number, line in json_lines(data, lambda number: f"{path} line {number}"):
        if not isinstance(line, dict):
            raise InputError(f"{path} line {number}: not a record (a JSON object)")
        entry = line.get("proof")
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            continue
        name = line.get("key") or f"row {line.get('row')}, {line.get('kind')}"
        found.setdefault(entry["file"], []).append((f"{path} line {number} ({name})", line, entry))
    return found


def against_records(checked: Checked, named: list[Named], time_limit: float | None = None, path: str | Path = "") -> str | None:
    """Why a checked (accepted) certificate does not back every record that names it (None: it
    does): `against_record` for each, within `time_limit` seconds in all (InputError past it). A
    record that states a minimum without its witness (crosscheck's second explainer) is replayed
    with the witness of the record it names in `solvers_from`, when that one names this file too."""
    witnesses = {record.get("key"): record.get("minimum_witness") for _, record, _ in named if record.get("key")}
    with _limited(time_limit, Path(path)):
        for where, record, entry in named:
            why = against_record(checked, where, record, entry, witnesses.get(record.get("solvers_from")))
            if why is not None:
                return why
    return None


def against_record(
    checked: Checked, where: str, record: dict[str, Any], entry: dict[str, Any], witness: Any = None
) -> str | None:
    """Why a checked certificate is not the one its record names, or does not support what the
    record states (None: it is, and it does): its SHA-256, its problem, its claim and kind, each
    against the record's; then the record whole (`cardinal.checker.record.check_record`: the
    prediction, the minimum replayed, the lower bound, the verdict... each derived exactly)."""
    if not isinstance(entry.get("sha256"), str):
        return f"{where} names no certificate SHA-256 (a record written before certificates were bound to their records)"
    if checked.sha256 != entry["sha256"]:
        return f"not the certificate {where} names: its SHA-256 is {checked.sha256}, the record's {entry['sha256']}"
    certificate = checked.certificate
    for field, given, wanted in (
        ("problem", certificate.get("problem"), entry.get("problem")),
        ("claim", certificate.get("claim"), entry.get("claim")),
        ("kind", (certificate.get("problem") or {}).get("kind"), record.get("kind")),
    ):
        if given != wanted:
            return f"its {field} is not the one {where} states"
    if not checked.report.accepted:
        return checked.report.message
    why = check_record(record, certificate, checked.network, witness=witness)
    return None if why is None else f"{where} states what its certificate does not support: {why}"


def _network_document(path: str | Path, activations: str | None, input_shape: tuple[int, ...] | None = None) -> Any:
    """The cardinal.network/1 document of a network file: JSON as written, others converted."""
    from cardinal.formats.loaders import read_model

    document, chain, _ = read_model(path, activations, input_shape)
    if document is not None:
        return document
    return Network.from_chain(chain).to_json()
