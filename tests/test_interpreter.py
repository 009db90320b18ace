"""The interpreter (Table 3) against the generated skeleton (§4.1): one lowered IR, two readings.

``acrobat.codegen.visitor.LoweredVisitor`` holds the decisions both make; this
differential test runs the same batch through the generated skeleton and through
``acrobat.bench.interpreter`` and requires equal results and the same DFG
(every node's instance, block, phase, stage and depth: ``Program.trace``). The
corpus: the programs of ``tests/*_progs.py`` that compile statically (each
module with inputs of its kind), the paper's seven models, the examples, and
fuzz programs (``tests/fuzz``), each with its own ``Options`` (fibers, ghosts,
concurrency on or off).
"""

from __future__ import annotations

import collections
import importlib
import random
import warnings
from typing import Any, Callable

import pytest
import torch

import acrobat as ab
import examples
from acrobat.bench.interpreter import InterpretedProgram
from acrobat.data.synthetic import synthetic_trees
from acrobat.models import MODELS, get_model
from acrobat.program import Program
from tests.fuzz.chooser import RandomChooser
from tests.fuzz.generator import generate
from tests.fuzz.oracle import load
from tests.fuzz.world import Params as FuzzParams
from tests.fuzz.world import make_instances
from tests.progs import Small
from tests.test_tdc import P as TdcParams

TOL = {"rtol": 1e-5, "atol": 1e-6}
FUZZ_SEEDS = [0, 1, 2, 3, 4, 5, 8, 9]  # seed 7: a slow program (the suite stays under 10 minutes)
SWITCHED = ab.Options(concurrency=False, ghosts=False, fibers=False, stages=False)
SWITCHED_MODELS = ("treelstm", "stackrnn", "drnn")  # concurrency, fibers and ghosts each matter in one of them


def differ(prog: Program, instances: list, shared: tuple, options: ab.Options | None = None) -> str | None:
    """None when the interpreter gives the generated skeleton's results and DFG on ``instances``, else how
    they differ. Random operators draw from torch's generator, seeded alike for both runs."""
    options = options or prog.options
    runs = []
    for rt in (prog.runtime(*shared, options=options), InterpretedProgram(prog, options).runtime(*shared)):
        rt.trace = []
        torch.manual_seed(0)
        with torch.no_grad():
            runs.append((rt.run(instances, shared), collections.Counter(rt.trace)))
    (want, nodes), (got, interpreted) = runs
    try:
        torch.testing.assert_close(got, want, **TOL)
    except AssertionError as exc:
        return f"results differ: {exc}"
    if nodes != interpreted:
        return (f"DFGs differ: skeleton only {sorted((nodes - interpreted).elements())[:4]}, "
                f"interpreter only {sorted((interpreted - nodes).elements())[:4]}")
    return None


def static(prog: Program, instances: list, shared: tuple, options: ab.Options | None = None) -> bool:
    """Whether ``prog`` runs ``instances`` as plain Python and, batched, in the static tier."""
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for x in instances:
                k = prog.instance_pos
                prog.fn(*shared[:k], x, *shared[k:])
            c = prog.compile(len(shared), options or prog.options, shared)
            if c.plan.dynamic is None and c.bug is None:
                prog.run(instances, *shared, backend="eager", options=options)
                c = prog.compile(len(shared), options or prog.options, shared)  # a limit met: the dynamic tier's now
    except Exception:  # noqa: BLE001 - not a program for these inputs, or rejected: not in the corpus
        return False
    return c.plan.dynamic is None and c.bug is None


def _tokens(n: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(7) for _ in range(rng.randint(1, 6))] for _ in range(n)]


def _token(n: int) -> list[int]:
    return [t for t, *_ in _tokens(n)]


def _steps(n: int) -> list[tuple]:
    rng = random.Random(1)
    return [tuple((rng.randrange(9), rng.randint(0, 4)) for _ in range(rng.randint(0, 4))) for _ in range(n)]


#: each module of test programs with its parameters and instances; a program that compiles statically and
#: runs plain Python on one of its module's inputs is in the corpus
INPUTS: dict[str, list[tuple[Callable[[], Any], Callable[[int], list]]]] = {
    "progs": [(Small, _tokens), (Small, _token)],
    "control_progs": [(Small, _tokens), (Small, lambda n: [(t, len(s)) for t, s in zip(_token(n), _tokens(n))]),
                      (Small, lambda n: [torch.randn(4) for _ in range(n)])],
    "container_progs": [(lambda: importlib.import_module("tests.container_progs").Params(), _tokens)],
    "dynamic_progs": [(lambda: importlib.import_module("tests.dynamic_progs").Params(), _tokens)],
    "effects_progs": [(lambda: TdcParams(hidden=4, vocab=16), lambda n: synthetic_trees(n, seed=3, vocab_size=16)),
                      (lambda: TdcParams(hidden=4, vocab=16), _tokens), (lambda: TdcParams(hidden=4, vocab=16), _token)],
    "message_progs": [(Small, _tokens)],
    "ragged_progs": [(Small, _tokens)],
    "rowops_progs": [(lambda: importlib.import_module("tests.test_rowops")._params(), _tokens)],
    "region_progs": [(lambda: importlib.import_module("tests.region_progs").Params(), _tokens),
                     (lambda: importlib.import_module("tests.region_progs").Params(),
                      lambda n: [importlib.import_module("tests.region_progs").tree_of(2, k) for k in range(n)])],
    "ranking_progs": [(lambda: TdcParams(hidden=4, vocab=16), lambda n: [(t, min(2, len(t))) for t in _tokens(n)])],
    "stage_progs": [(Small, _steps)],
    "starred_progs": [(lambda: importlib.import_module("tests.starred_progs").Params(), _tokens)],
    "state_progs": [(lambda: importlib.import_module("tests.container_progs").Params(),
                     lambda n: importlib.import_module("tests.state_progs").trees(n, 1, binary=True))],
    "tdc_progs": [(TdcParams, _tokens), (TdcParams, _token)],
    "user_progs": [(Small, _tokens), (Small, _token)],
    "nn_progs": [(Small, _tokens)],
    "padded_progs": [(lambda: importlib.import_module("tests.padded_progs").Params(), _tokens)],
    "host_map_progs": [(lambda: importlib.import_module("tests.host_map_progs").MP(),
                        lambda n: importlib.import_module("tests.test_host_maps")._batch("dag_memo_count", n)),
                       (lambda: importlib.import_module("tests.host_map_progs").MP(),
                        lambda n: importlib.import_module("tests.test_host_maps")._batch("counts_per_key", n))],
}


def _corpus() -> list[tuple[str, str]]:
    out = []
    for module in INPUTS:
        m = importlib.import_module(f"tests.{module}")
        out += [(module, name) for name, obj in vars(m).items()
                if isinstance(obj, Program) and obj.fn.__module__ == m.__name__]
    return out


@pytest.mark.parametrize("module, name", _corpus(), ids=[f"{m}.{n}" for m, n in _corpus()])
def test_test_programs(module, name):
    prog = getattr(importlib.import_module(f"tests.{module}"), name)
    for make_params, make_instances_ in INPUTS[module]:
        shared, instances = (make_params(),), make_instances_(5)
        if static(prog, instances, shared):
            assert differ(prog, instances, shared) is None
            return
    pytest.skip("no input of its module runs it in the static tier")


@pytest.mark.parametrize("model", list(MODELS))
def test_paper_models(dataset, model):
    spec = get_model("berxit", seq_len=8, layers=2) if model == "berxit" else MODELS[model]
    _, hidden = min(spec.sizes, key=lambda kv: kv[1])
    params = spec.make_params(len(dataset.vocab), hidden, 0)
    instances = spec.instances(dataset.trees[:3])[:3]
    for options in (None, SWITCHED) if model in SWITCHED_MODELS else (None,):
        assert differ(spec.program, instances, (params,), options) is None


@pytest.mark.parametrize("name", list(examples.EXAMPLES))
def test_examples(name):
    ex = examples.load(name)
    shared, instances = (ex.make_params(0),), ex.instances(4, 0)
    if not static(ex.program, instances, shared):
        pytest.skip("runs in the dynamic tier")
    assert differ(ex.program, instances, shared) is None


@pytest.mark.parametrize("seed", FUZZ_SEEDS)
def test_fuzz_programs(seed):
    fp = generate(RandomChooser(seed))
    main = load(fp.source).main
    shared = (FuzzParams(seed, torch.float64 if fp.dtype == "float64" else torch.float32),)
    instances = make_instances(fp.kind, max(fp.batch_sizes), seed, shared[0].h0.dtype)
    options = ab.Options(**fp.options)
    if not static(main, instances, shared, options):
        pytest.skip("plain Python fails or the program runs in the dynamic tier")
    assert differ(main, instances, shared, options) is None


def test_a_method_program_gets_self_in_its_place():
    """``instance_pos``: a program defined as a method takes the module first, the instance second."""
    u = importlib.import_module("tests.user_error_progs")
    tagger = u.Tagger()
    assert differ(u.Tagger.encode, _tokens(3), (tagger,)) is None
    assert differ(u.Tagger.encode_scaled, _tokens(3), (tagger, 0.5)) is None
