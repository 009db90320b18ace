"""torch.nn modules called inside models (``p.cell(x, (h, c))``) run batched on both backends.

Each model in ``nn_progs.py`` is run batched with ``backend="eager"`` and
``backend="compiled"`` and compared with the plain per-instance run
(``model(instance, params)``, which calls the user's modules themselves).
The compiled backend runs under ``torch.inference_mode()``; its kernels are
cached on disk, so only a first run of the suite compiles.
"""

from __future__ import annotations

import os
import random
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import acrobat as ab
from acrobat.codegen.kernels import trace_block
from acrobat.codegen.modules import ModuleForm, call_form
from acrobat.data.synthetic import synthetic_trees
from acrobat.data.tree import Tree
from acrobat.runtime.plan import RowSpec
from tests import nn_progs as P

STRICT = ab.Options(strict=True)  # the static tier's rejection, not the dynamic tier's run

TOL = {"rtol": 1e-4, "atol": 1e-5}
BACKENDS = ["eager", "compiled"]
PROGS_FILE = os.path.abspath(P.__file__)


def marker_line(key: str) -> int:
    """1-based line of the unique ``# N:<key>`` marker in nn_progs.py."""
    with open(PROGS_FILE, encoding="utf-8") as f:
        hits = [i + 1 for i, text in enumerate(f) if text.rstrip().endswith(f"# N:{key}")]
    assert len(hits) == 1
    return hits[0]


def trees(n: int, seed: int = 0) -> list[Tree]:
    """``n`` small random trees whose leaves hold their token as a 0-d int64 tensor (``node.word``)."""
    out = synthetic_trees(n, seed, vocab_size=P.VOCAB)
    for t in out:
        for leaf in t.leaves():
            leaf.word = torch.tensor(leaf.word_id)  # type: ignore[assignment]
    return out


def sequences(n: int, seed: int = 0, max_len: int = 7) -> list[list[torch.Tensor]]:
    """``n`` token lists of random lengths 1..max_len, tokens as 0-d int64 tensors."""
    rng = random.Random(seed)
    return [[torch.tensor(rng.randrange(P.VOCAB)) for _ in range(rng.randint(1, max_len))] for _ in range(n)]


def check(prog: ab.Program, batch: list, params: nn.Module, backend: str) -> None:
    """The batched run equals the plain per-instance run of every instance."""
    with torch.no_grad():
        expected = [prog(x, params) for x in batch]
    with torch.inference_mode():
        out = prog.run(batch, params, backend=backend)
    torch.testing.assert_close(out, expected, **TOL)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("size", [1, 8, 64])
def test_tree_gru(backend, size):
    """Recursion over trees with nn.Embedding, nn.Linear and nn.GRUCell (no state at the leaves)."""
    check(P.tree_gru, trees(size, seed=size), P.TreeGRUParams(), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("size", [1, 8, 64])
def test_seq_lstm(backend, size):
    """An nn.LSTMCell over variable-length token lists, an nn.Sequential head (Linear, Tanh, LayerNorm, Dropout)."""
    check(P.seq_lstm, sequences(size, seed=size), P.SeqLSTMParams(), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_lstm_without_state(backend):
    """``p.cell(x)`` with no (h, c): zeros, as nn.LSTMCell does."""
    check(P.seq_lstm_fresh, sequences(8), P.SeqLSTMParams(seed=1), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("size", [1, 8])
def test_user_module_and_activations(backend, size):
    """A user nn.Module's forward (Linear, GELU, LayerNorm, RNNCell inside) and one of its methods,
    activation modules from an nn.ModuleList, a cell held in a variable, cells without bias, ``p.W.mul(h)``."""
    check(P.mixed, sequences(size, seed=3), P.MixedParams(), backend)


def test_gru_cell_batches_without_per_sample_fallback():
    """nn.GRUCell runs as its decomposition: vmap's slow per-sample fallback (a warning) never runs."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check(P.tree_gru, trees(8), P.TreeGRUParams(), "eager")


def test_module_parameters_are_kernel_inputs():
    """A compiled block takes the module's parameters as graph inputs, once per launch (§5.1):
    no constants baked into the graph, and each weight's full shape (not copied per instance)."""
    params = P.SeqLSTMParams()
    prog = P.seq_lstm
    c = prog.compile(1)
    rt = prog.runtime(params)
    step, form = next((b, s) for b in c.blocks.values() for s in rt.shared[b.id]
                      if isinstance(s, ModuleForm) and s.key[0] == "LSTMCell")
    assert all(a is b for a, b in zip(form.tensors, params.cell.parameters()))  # the user's weights, not copies
    rows = [RowSpec((P.EMBED,), torch.float32), RowSpec((P.HIDDEN,), torch.float32), RowSpec((P.HIDDEN,), torch.float32)]
    graph = trace_block(c.plan.blocks[step.id], rows, rt.shared[step.id], fused=False, device=torch.device("cpu"))
    nodes = list(graph.gm.graph.nodes)
    assert not [n for n in nodes if n.op == "get_attr"]
    shapes = [tuple(n.meta["val"].shape) for n in nodes if n.op == "placeholder"]
    shapes = [s for s in shapes if all(isinstance(d, int) for d in s)]  # unbatched: no symbolic batch size
    for w in params.cell.parameters():
        assert tuple(w.shape) in shapes


def test_cells_match_torch_exactly_enough():
    """The decomposed cells equal PyTorch's (gate order included), batched or not, with and without state."""
    torch.manual_seed(0)
    x, h, c = torch.randn(5, 4), torch.randn(5, 6), torch.randn(5, 6)
    for cell in (nn.RNNCell(4, 6), nn.RNNCell(4, 6, nonlinearity="relu"), nn.GRUCell(4, 6), nn.GRUCell(4, 6, bias=False)):
        form = call_form(cell, None, "p.cell", "model.py", 1, 0)
        torch.testing.assert_close(form(x, h), cell(x, h))
        torch.testing.assert_close(form(x[0]), cell(x[0]))
    lstm = nn.LSTMCell(4, 6)
    form = call_form(lstm, None, "p.cell", "model.py", 1, 0)
    torch.testing.assert_close(form(x, (h, c)), lstm(x, (h, c)))
    torch.testing.assert_close(form(x[0], None), lstm(x[0], None))


def test_users_module_is_not_modified():
    """The twin shares the user's parameters and leaves the user's module (class, forward, children) alone."""
    params = P.MixedParams()
    forward, children = params.lstm.forward, dict(params.named_modules())
    form = call_form(params, "lstm", "p", "model.py", 1, 0)
    assert params.lstm.forward == forward and dict(params.named_modules()) == children
    assert all(a is b for a, b in zip(form.tensors, params.lstm.parameters()))
    assert "forward" not in vars(params.lstm)


@pytest.mark.parametrize("prog, key, phrase", [
    (P.bad_lstm, "bad_lstm", "`p.rnn` is nn.LSTM, which acrobat batches over a sequence whose length differs per "
                             "instance, but its input is not a stacked list of the sequence's rows"),
    (P.bad_batchnorm, "bad_batchnorm", "`p.bn` is nn.BatchNorm1d, which has no batchable form in acrobat: write its "
                                       "computation with torch.nn.functional operators over its tensors (p.bn.weight"),
])
@pytest.mark.parametrize("backend", BACKENDS)
def test_unsupported_module_is_rejected_clearly(prog, key, phrase, backend):
    """A module with no batchable form: CompileError at the model's call site, saying what to write instead."""
    with pytest.raises(ab.CompileError) as info, torch.inference_mode():
        prog.run(sequences(4), P.BadParams(), backend=backend, options=STRICT)
    msg = str(info.value)
    assert msg.startswith(f"{PROGS_FILE}:{marker_line(key)}:"), msg
    assert phrase in msg


def test_dropout_in_eval_mode_is_the_identity():
    params = P.BadParams().eval()
    check(P.bad_dropout, sequences(4), params, "eager")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), size=st.integers(1, 12), max_len=st.integers(1, 9),
       backend=st.sampled_from(BACKENDS))
def test_random_batches(seed, size, max_len, backend):
    """Random trees and sequences (lengths, batch sizes, backends) equal their per-instance runs."""
    check(P.tree_gru, trees(size, seed), P.TreeGRUParams(seed=1), backend)
    check(P.seq_lstm, sequences(size, seed, max_len), P.SeqLSTMParams(seed=2), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_loop_carried_value_read_only_by_its_block(backend):
    """A block in a loop that reads a name it writes outputs it (before, ``c`` kept its first value)."""
    check(P.carried_in_block, sequences(8), P.SeqLSTMParams(), backend)
