"""The /perf/collective facts: a multi-node collective's figures and the search's verdict, this host's share."""

from __future__ import annotations

from typing import Any

from ..base import Collector, ParseError
from ..fragments import array, integer, number, obj, string

#: What the collective search says of one host (isolation.Verdict.of_host).
HOST_VERDICTS = ("ok", "at fault", "pair only", "unresolved")

_LAUNCH = obj("One collective this host took part in.", {
    "index": integer("The launch's number in the run (its evidence file is named by it)."),
    "hosts": array("The group's hosts, references included.", string("A host.")),
    "figure": number("Average bus bandwidth (nccl-tests '# Avg bus bandwidth'), GB/s; null when it failed.", True),
    "failure": string("Why it gave no figure, in the tool's own words (null: it gave one).", True),
    "failure_kind": string("error, hang or timeout (the step cancelled at its time limit); null: no failure.", True),
    "evidence": string("The launcher's output file."),
    "seconds": number("How long it ran."),
})

_FINDING = obj("One thing the search found at fault that involves this host.", {
    "kind": string("host, pair (fine alone, slow together) or path (between two leaves).",
                   enum=("host", "pair", "path")),
    "members": array("The hosts, or the two leaves of a path.", string("A host or leaf.")),
    "why": string("The search's reason, in words."),
    "evidence": array("The decisions (tests) proving it, in order.", obj("One decision.", {
        "index": integer("The test's number in the search."),
        "round": integer("Its round."),
        "group": array("Its group.", string("A host.")),
        "figure": number("Its figure, GB/s (null: it failed).", True),
        "failure": string("Its failure in the tool's words.", True),
        "failure_kind": string("error, hang or timeout.", True),
        "result": string("pass, slow, failed or borderline.", enum=("pass", "slow", "failed", "borderline")),
        "why": string("Why the search ran it."),
    })),
})

_ISOLATION = obj("The collective search's verdict on this host (null: the search did not run: no group was slow).", {
    "verdict": string("at fault: slow or failing in every group it is in, confirmed beside hosts that passed; pair "
                      "only: slow with one partner, fine alone (the cable or path between them); unresolved: the "
                      "search could not settle it (rounds or budget spent); ok.", enum=HOST_VERDICTS),
    "search": string("The whole search's state: at fault, unresolved or clear.",
                     enum=("at fault", "unresolved", "clear")),
    "rounds": integer("Rounds the search ran."),
    "tests": integer("Tests (collectives) the search ran."),
    "findings": array("What the search found at fault that names this host, with its evidence chain.", _FINDING),
}, nullable=True)

SCHEMA = obj("A multi-node collective (nccl-tests through srun or mpirun) at one scale, this host's share: the "
             "figure of the first group it was in and the search's verdict on it.", {
                 "scale": string("domain, domain_ib, leaf, cross_leaf, pair or all.",
                                 enum=("domain", "domain_ib", "leaf", "cross_leaf", "pair", "all")),
                 "launcher": string("srun or mpirun.", enum=("srun", "mpirun")),
                 "threshold_gbps": number("The least average busbw a healthy group reaches at this scale "
                                          "(perf.probes.collective.thresholds.<scale> of the baseline), GB/s; null: "
                                          "not set.", True),
                 "busbw_gbps": number("The average busbw of the first group this host was in (the screening "
                                      "round), GB/s; null when that collective failed.", True),
                 "failure": string("That collective's failure in the tool's words (null: it gave a figure).", True),
                 "launches": array("Every collective this host took part in, in order.", _LAUNCH),
                 "isolation": _ISOLATION,
             })


def _not_parsed(text: str) -> Any:
    raise ParseError("the /perf/collective facts come from `fabricproof collective run` (its groups and search), "
                     "not from one output")


COLLECTORS = (
    # A group-level probe: one job over a group of hosts, launched by probes.collective, never by the per-host
    # probe runner (probes/spec.GROUP_PROBES says so); loads_fabric keeps it out of any plain collection.
    Collector(id="collective", argv=(), parse=_not_parsed, provides="/perf/collective", schema=SCHEMA, family="perf",
              description="A multi-node collective and the search for the host at fault (fabricproof collective "
                          "run), per host.", default=False, loads_fabric=True, timeout_s=600.0),
)
