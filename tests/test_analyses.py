"""The compile-time analyses, checked on the DFG (``trace``) and on the compiled blocks.

Parameter reuse and code duplication (§5.1, App. B.1), hoisting and static
depths (App. A.1), inline depth computation with concurrent calls and map
loops (§4.1), program phases (§4.1) and shared expressions. Every program
used here is also run batched and compared with its plain per-instance call.
"""

from __future__ import annotations

import inspect
from collections import Counter

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import progs

import acrobat
from acrobat import Options
from acrobat.data.tree import Tree
from acrobat.models import birnn_program, treelstm_program
from acrobat.models.birnn import BiRNNParams
from acrobat.models.treelstm import TreeLSTMParams

treelstm = treelstm_program.treelstm
birnn = birnn_program.birnn
TOL = {"rtol": 1e-5, "atol": 1e-6}


# ---------------------------------------------------------------- helpers


def line_of(module, text: str) -> int:
    """1-based line of the unique source line of ``module`` containing ``text``."""
    lines = inspect.getsource(module).splitlines()
    hits = [i + 1 for i, line in enumerate(lines) if text in line]
    assert len(hits) == 1, (text, hits)
    return hits[0]


def marker(key: str) -> int:
    return line_of(progs, f"# M:{key}")


def blocks_at(compiled, line: int, prefix: str = "") -> list:
    """The compiled blocks of source line ``line`` (in specializations whose name starts with ``prefix``)."""
    return [b for b in compiled.blocks.values() if b.loc.line == line and b.spec.name.startswith(prefix)]


def shared_values(compiled, block, *shared) -> list:
    """The objects a block's shared params are bound to in a run with ``shared``."""
    slots = compiled.plan.prologue((None, *shared))
    # horizontally fused weights (a tuple built from the block's weights) are checked separately
    return [slots[p.slot] for p in block.shared_params if not isinstance(slots[p.slot], tuple)]


def same_objects(values, expected) -> bool:
    return {id(v) for v in values} == {id(e) for e in expected}


def assert_run_matches_plain(prog, instances, *shared, options=None):
    out = prog.run(instances, *shared, options=options)
    assert len(out) == len(instances)
    for inst, got in zip(instances, out):
        torch.testing.assert_close(got, prog(inst, *shared), **TOL)


def leaf(w: int) -> Tree:
    return Tree(label=0, word=f"w{w}", word_id=w)


def node(a: Tree, b: Tree) -> Tree:
    return Tree(label=0, left=a, right=b)


def internal_nodes(t: Tree) -> list[Tree]:
    out, stack = [], [t]
    while stack:
        n = stack.pop()
        if not n.is_leaf:
            out.append(n)
            stack += [n.left, n.right]
    return out


def expected_depths(t: Tree, leaf_depth: int) -> list[int]:
    """Depth of every internal node: 1 + the max of its children's depths (leaves at ``leaf_depth``)."""
    out: list[int] = []

    def go(n: Tree) -> int:
        if n.is_leaf:
            return leaf_depth
        d = 1 + max(go(n.left), go(n.right))
        out.append(d)
        return d

    go(t)
    return sorted(out)


@pytest.fixture(scope="module")
def tparams():
    return TreeLSTMParams(vocab_size=20, hidden=4)


@pytest.fixture(scope="module")
def bparams():
    return BiRNNParams(20, 4)


@pytest.fixture(scope="module")
def small():
    return progs.Small()


LEAF_LINE = line_of(treelstm_program, "x = p.emb[node.word_id]")
INNER_LINE = line_of(treelstm_program, "hc = torch.cat([lh, rh])")
ROOT_LINE = line_of(treelstm_program, "return h @ p.W_out + p.b_out, h")
RNN_LINE = line_of(birnn_program, "h = torch.tanh(emb[tok] @ d.W + d.b + h @ d.U)")
OUT_LINE = line_of(birnn_program, "out.append(torch.cat([fw[t], bw[n - 1 - t]]) @ p.W_out + p.b_out)")

T1 = node(leaf(1), leaf(2))
T2 = node(node(leaf(3), leaf(4)), leaf(5))
T3 = node(node(leaf(6), leaf(7)), node(leaf(8), node(leaf(9), leaf(10))))
TREES = [T1, T2, T3, leaf(11)]


# ---------------------------------------------------------------- parameter reuse (§5.1, App. B.1)


def test_treelstm_weights_are_shared_states_are_tensors(tparams):
    c = treelstm.compile(1)
    [lf] = blocks_at(c, LEAF_LINE)
    [inner] = blocks_at(c, INNER_LINE)
    [root] = blocks_at(c, ROOT_LINE)
    p = tparams
    # leaf: the word id is a per-instance host number; the weights are shared
    assert [q.role for q in lf.params].count("host") == 1
    assert not [q for q in lf.params if q.role == "tensor"]
    assert same_objects(shared_values(c, lf, p), [p.emb, p.W_iou, p.b_iou])
    # internal node: the children's states are batched tensors, the weights shared
    assert sorted(q.name for q in inner.params if q.role == "tensor") == ["lc", "lh", "rc", "rh"]
    assert not [q for q in inner.params if q.role == "host"]
    assert same_objects(shared_values(c, inner, p), [p.U_iou, p.b_iou, p.U_f, p.b_f])
    slots = c.plan.prologue((None, p))
    [fused] = [slots[q.slot] for q in inner.shared_params if isinstance(slots[q.slot], tuple)]
    torch.testing.assert_close(fused[0], torch.cat([p.U_iou, p.U_f], 1))  # horizontal fusion (App. B.1)
    # classifier
    assert [q.role for q in root.params if q.role != "shared"] == ["tensor"]
    assert same_objects(shared_values(c, root, p), [p.W_out, p.b_out])
    # every parameter tensor of the model is passed shared, never batched
    for b in c.blocks.values():
        for q in b.batched_params:
            assert q.role in ("tensor", "host")
    assert_run_matches_plain(treelstm, TREES, p)


def test_birnn_rnn_is_specialized_per_direction(bparams):
    c = birnn.compile(1)
    p = bparams
    rnn_blocks = [b for b in c.blocks.values() if b.loc.line == RNN_LINE]
    specs = sorted({b.spec.name for b in rnn_blocks})
    assert specs == ["rnn_0", "rnn_1"]  # code duplication: one copy per weight set
    dirs = {"fwd": p.fwd, "bwd": p.bwd}
    seen = set()
    for spec in specs:
        blocks = [b for b in rnn_blocks if b.spec.name == spec]
        vals = [v for b in blocks for v in shared_values(c, b, p)]
        # all weights of this copy are shared, and they are exactly one direction's (plus the embedding)
        matches = [name for name, d in dirs.items() if same_objects(vals, [p.emb, d.W, d.b, d.U])]
        assert len(matches) == 1, spec
        seen.add(matches[0])
        hoisted = [b for b in blocks if b.sdepth is not None]
        recurrent = [b for b in blocks if b.sdepth is None]
        assert len(hoisted) == 1 and len(recurrent) == 1
        assert [q.role for q in hoisted[0].batched_params] == ["host"]  # the token id
        assert all(q.role == "tensor" for q in recurrent[0].batched_params)
        assert same_objects(shared_values(c, recurrent[0], p), [dirs[matches[0]].U])
    assert seen == {"fwd", "bwd"}
    assert_run_matches_plain(birnn, [[1, 2, 3], [4, 5], [6]], p)


# ---------------------------------------------------------------- depths (§4.1, App. A.1)


def test_treelstm_depths(tparams):
    c = treelstm.compile(1)
    [lf] = blocks_at(c, LEAF_LINE)
    [inner] = blocks_at(c, INNER_LINE)
    [root] = blocks_at(c, ROOT_LINE)
    assert lf.sdepth is not None and inner.sdepth is None and root.sdepth is None
    assert c.plan.base == lf.sdepth + 1
    rows = treelstm.trace(TREES, tparams)
    # hoisted: every leaf of every instance at one static (phase, depth)
    leaf_rows = [r for r in rows if r[1] == lf.name]
    assert len(leaf_rows) == sum(len(t.leaves()) for t in TREES)
    assert {(ph, d) for _, _, ph, _, d in leaf_rows} == {(0, lf.sdepth)}
    # internal nodes: 1 + max(children), counted from base (a node over two leaves is at base)
    for i, t in enumerate(TREES):
        got = sorted(d for inst, name, ph, _, d in rows if inst == i and name == inner.name)
        assert got == expected_depths(t, c.plan.base - 1), i
        assert all(ph == 0 for inst, name, ph, _, _ in rows if inst == i and name == inner.name)
    assert min(d for _, name, _, _, d in rows if name == inner.name) == c.plan.base
    # the classifier is a program phase: all roots at phase 1, one depth
    root_rows = [r for r in rows if r[1] == root.name]
    assert sorted(r[0] for r in root_rows) == list(range(len(TREES)))
    assert {(ph, d) for _, _, ph, _, d in root_rows} == {(1, c.plan.base)}
    assert c.n_phases == 2


def test_treelstm_without_hoisting(tparams):
    opts = Options(hoisting=False)
    c = treelstm.compile(1, opts)
    [lf] = blocks_at(c, LEAF_LINE)
    [inner] = blocks_at(c, INNER_LINE)
    assert lf.sdepth is None  # no static depth any more
    assert all(b.sdepth is None for b in c.blocks.values())
    assert c.plan.base == 0
    rows = treelstm.trace(TREES, tparams, options=opts)
    # leaves now run on the inline counter: a node over two leaves is one above them
    for i, t in enumerate(TREES):
        got = sorted(d for inst, name, _, _, d in rows if inst == i and name == inner.name)
        assert got == expected_depths(t, c.plan.base), i
    hoisted_rows = treelstm.trace(TREES, tparams)
    inner_h = max(d for _, name, _, _, d in hoisted_rows if name == inner.name)
    inner_nh = max(d for _, name, _, _, d in rows if name == inner.name)
    assert inner_nh - c.plan.base == inner_h - treelstm.compile(1).plan.base + 1
    assert_run_matches_plain(treelstm, TREES, tparams, options=opts)


def test_treelstm_without_concurrency_depths_grow(tparams):
    opts = Options(concurrency=False)
    c_on, c_off = treelstm.compile(1), treelstm.compile(1, opts)
    [inner_on] = blocks_at(c_on, INNER_LINE)
    [inner_off] = blocks_at(c_off, INNER_LINE)
    on = treelstm.trace([T3], tparams)
    off = treelstm.trace([T3], tparams, options=opts)
    d_on = [d for _, name, _, _, d in on if name == inner_on.name]
    d_off = [d for _, name, _, _, d in off if name == inner_off.name]
    assert len(d_on) == len(d_off) == len(internal_nodes(T3))
    # concurrent subtrees share depths; the sequential counter gives every internal node its own depth
    assert len(set(d_off)) > len(set(d_on))
    assert len(set(d_off)) == len(d_off)
    assert_run_matches_plain(treelstm, TREES, tparams, options=opts)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.recursive(st.integers(0, 19).map(leaf), lambda ch: st.tuples(ch, ch).map(lambda ab: node(*ab)),
                             max_leaves=8), min_size=1, max_size=4))
def test_treelstm_depth_rule_random_trees(tparams, trees):
    c = treelstm.compile(1)
    [inner] = blocks_at(c, INNER_LINE)
    rows = treelstm.trace(trees, tparams)
    for i, t in enumerate(trees):
        got = sorted(d for inst, name, _, _, d in rows if inst == i and name == inner.name)
        assert got == expected_depths(t, c.plan.base - 1)
    assert_run_matches_plain(treelstm, trees, tparams)


# ---------------------------------------------------------------- hoisting and phases in BiRNN


def test_birnn_hoisted_projection_and_consecutive_recurrence(bparams):
    c = birnn.compile(1)
    sents = [[1, 2, 3, 4], [5, 6], [7]]
    rows = birnn.trace(sents, bparams)
    for spec in ("rnn_0", "rnn_1"):
        blocks = blocks_at(c, RNN_LINE, spec)
        [hoisted] = [b for b in blocks if b.sdepth is not None]
        assert any(q.role == "host" for q in hoisted.params)
        assert hoisted.sdepth < c.plan.base
        names = {b.name for b in blocks}
        assert len(names) == 2  # the hoisted projection and the recurrent step are told apart
        for i, s in enumerate(sents):
            depths = sorted(d for inst, nm, ph, _, d in rows if inst == i and nm in names)
            assert len(depths) == 2 * len(s)  # one projection and one recurrent step per token
            # the projections of all tokens share the static depth
            assert depths[: len(s)] == [hoisted.sdepth] * len(s)
            # the recurrent steps run at consecutive depths from base
            assert depths[len(s):] == list(range(c.plan.base, c.plan.base + len(s)))
    assert_run_matches_plain(birnn, sents, bparams)


def test_birnn_output_layer_is_a_program_phase(bparams):
    sents = [[1, 2, 3, 4], [5, 6], [7]]
    c = birnn.compile(1)
    [out] = blocks_at(c, OUT_LINE)
    rows = [r for r in birnn.trace(sents, bparams) if r[1] == out.name]
    assert len(rows) == sum(map(len, sents))
    assert {(ph, d) for _, _, ph, _, d in rows} == {(1, c.plan.base)}  # one launch for all tokens of all sentences
    assert c.n_phases == 2
    # the ablation: no phases, the output layer waits on each sentence's own recurrence
    opts = Options(phases=False)
    c_off = birnn.compile(1, opts)
    [out_off] = blocks_at(c_off, OUT_LINE)
    rows_off = [r for r in birnn.trace(sents, bparams, options=opts) if r[1] == out_off.name]
    assert {ph for _, _, ph, _, _ in rows_off} == {0}
    assert len({d for _, _, _, _, d in rows_off}) > 1
    assert c_off.n_phases == 1
    assert_run_matches_plain(birnn, sents, bparams, options=opts)


def test_explicit_phase_marks(small):
    c = progs.explicit_phases.compile(1)
    assert c.n_phases == 3
    insts = [[1, 2], [3], [4, 5, 6]]
    rows = progs.explicit_phases.trace(insts, small)
    for key, phase in (("ph0", 0), ("ph1", 1), ("ph2", 2)):
        [b] = blocks_at(c, marker(key))
        mine = [r for r in rows if r[1] == b.name]
        assert sorted(r[0] for r in mine) == [0, 1, 2]
        assert {r[2] for r in mine} == {phase}, key
    assert_run_matches_plain(progs.explicit_phases, insts, small)
    # without the marks the same statements share phase 0 (the heuristic finds no boundary here)
    c2 = progs.no_explicit_phases.compile(1)
    assert c2.n_phases == 1
    assert {r[2] for r in progs.no_explicit_phases.trace(insts, small)} == {0}
    assert_run_matches_plain(progs.no_explicit_phases, insts, small)


# ---------------------------------------------------------------- map loops (§4.1)


def test_map_loop_iterations_share_depths(small):
    c = progs.map_prog.compile(1)
    [step] = [b for b in blocks_at(c, marker("walk_step")) if b.sdepth is None]
    insts = [[1, 2, 3], [4], [5, 6]]
    rows = progs.map_prog.trace(insts, small)
    for i, items in enumerate(insts):
        depths = Counter(d for inst, name, _, _, d in rows if inst == i and name == step.name)
        # each item takes 2 recurrent steps; all items start together
        assert depths == Counter({c.plan.base: len(items), c.plan.base + 1: len(items)}), i
    assert_run_matches_plain(progs.map_prog, insts, small)
    # with concurrency off the iterations are chained: 2 * len(items) distinct depths
    opts = Options(concurrency=False)
    c_off = progs.map_prog.compile(1, opts)
    [step_off] = [b for b in blocks_at(c_off, marker("walk_step")) if b.sdepth is None]
    rows_off = progs.map_prog.trace(insts, small, options=opts)
    depths_off = sorted(d for inst, name, _, _, d in rows_off if inst == 0 and name == step_off.name)
    assert depths_off == list(range(c_off.plan.base, c_off.plan.base + 6))


def test_loop_carried_tensor_gives_increasing_depths(small):
    c = progs.carried_prog.compile(1)
    insts = [[1, 2, 3, 4], [5, 6]]
    rows = progs.carried_prog.trace(insts, small)
    dyn_names = {b.name for b in blocks_at(c, marker("cell")) if b.sdepth is None}
    assert dyn_names
    for i, items in enumerate(insts):
        depths = sorted(d for inst, name, _, _, d in rows if inst == i and name in dyn_names and d >= c.plan.base)
        assert depths == list(range(c.plan.base, c.plan.base + len(items))), i


def test_loop_carried_program_runs_correctly(small):
    assert_run_matches_plain(progs.carried_prog, [[1, 2, 3, 4], [5, 6]], small)


# ---------------------------------------------------------------- shared expressions


def test_zeros_initial_state(small):
    insts = [[1, 2, 3], [4], [5, 6]]
    assert_run_matches_plain(progs.zeros_prog, insts, small)
    # the recurrent block reads no per-instance copy of zeros: only the token and the state are batched
    c = progs.zeros_prog.compile(1)
    for b in blocks_at(c, marker("zeros_step")):
        assert all(q.role in ("host", "tensor") for q in b.batched_params)


def test_ops_over_weights_are_shared(small):
    insts = [[1, 2, 3], [4]]
    assert_run_matches_plain(progs.shared_expr_prog, insts, small)
    c = progs.shared_expr_prog.compile(1)
    vals = [v for b in c.blocks.values() for v in shared_values(c, b, small)]
    # `p.W @ p.U` is computed once per run and passed to the block unbatched
    assert any(isinstance(v, torch.Tensor) and v.shape == (4, 4) and torch.allclose(v, small.W @ small.U)
               for v in vals)


# ---------------------------------------------------------------- regressions (bugs found by these tests)


def test_function_specialized_for_shared_and_tensor_argument(small):
    assert_run_matches_plain(progs.two_specializations, [1, 2, 3], small)


@pytest.mark.parametrize("prog", [progs.call_result_arith, progs.call_results_sum], ids=["times_const", "sum"])
def test_arithmetic_on_program_call_results(small, prog):
    assert_run_matches_plain(prog, [1, 2, 3], small)
