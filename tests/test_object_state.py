"""Per-node results stored on the instance's own objects (issue 18, section 2), in the static tier.

``node.state = cell(...)`` read back as ``child.state``: each program
compiles statically (``Options(strict=True)``), equals the program run as
plain Python per instance on both backends, and leaves the same tensors on
the instance's objects. Plain calls and batched runs both store on the
objects, so every run gets its own deep copy of the instances.
"""

from __future__ import annotations

import copy

import pytest
import torch

import acrobat as ab
from tests import container_progs as cp
from tests import state_progs as sp

TOL = {"rtol": 1e-5, "atol": 1e-6}
STRICT = ab.Options(strict=True)

#: program name -> (binary trees?, the attributes it stores on every node)
PROGRAMS = {"childsum_bottom_up": (False, ("state",)), "recursive_h": (True, ("h",)),
            "concurrent_h": (True, ("h",)), "depths_and_optional": (True, ("best",)), "walk_down": (False, ())}


def _stored(trees: list[sp.Node], attrs: tuple[str, ...]) -> list:
    """What every node of ``trees`` holds under ``attrs``, node by node in post-order."""
    return [getattr(n, a) for t in trees for n in sp.postorder(t) for a in attrs]


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_stored_fields_run_statically_and_equal_plain(name, backend):
    prog = getattr(sp, name)
    binary, attrs = PROGRAMS[name]
    p = cp.Params()
    batch = sp.trees(12, len(name), binary)
    plain, batched = copy.deepcopy(batch), copy.deepcopy(batch)
    with torch.no_grad():
        want = [prog(t, p) for t in plain]
    stats = ab.RunStats()
    with torch.inference_mode() if backend == "compiled" else torch.no_grad():
        got = prog.run(batched, p, backend=backend, options=STRICT, stats=stats)
    assert stats.dynamic is None and stats.fallback is None
    torch.testing.assert_close(got, want, **TOL)
    stored = _stored(batched, attrs)  # read after the run, from the instance's objects: tensors, not handles
    assert all(isinstance(x, torch.Tensor) for x in torch.utils._pytree.tree_leaves(stored))
    torch.testing.assert_close(stored, _stored(plain, attrs), **TOL)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_gradients_through_stored_fields_equal_plain(name):
    prog = getattr(sp, name)
    binary, _ = PROGRAMS[name]
    p = cp.Params()
    batch = sp.trees(8, 3, binary)
    grads = []
    for outs in ([prog(t, p) for t in copy.deepcopy(batch)],
                 prog.run(copy.deepcopy(batch), p, backend="eager", options=STRICT)):
        p.zero_grad(set_to_none=True)
        sum(x.square().sum() for x in torch.utils._pytree.tree_leaves(outs)).backward()
        grads.append({n: q.grad.clone() for n, q in p.named_parameters() if q.grad is not None})
    assert grads[0] and grads[0].keys() == grads[1].keys()
    for n in grads[0]:
        torch.testing.assert_close(grads[1][n], grads[0][n], **TOL)


def test_loads_carry_the_stored_depth():
    """The post-order loop is a map loop (every iteration starts at one depth): a parent's cell still runs after
    its children's, because reading `child.state` raises the depth to where it was stored (§4.1); so a batch
    takes as many launches of the child loop's block as the deepest chain, not one per node."""
    p = cp.Params()
    batch = sp.trees(16, 5)
    stats = ab.RunStats()
    with torch.no_grad():
        sp.childsum_bottom_up.run(copy.deepcopy(batch), p, backend="eager", options=STRICT, stats=stats)
    nodes = sum(len(sp.postorder(t)) for t in batch)
    assert stats.kernel_launches < nodes


def test_an_attribute_of_a_shared_parameter_is_rejected_or_dynamic():
    p = cp.Params()
    batch = sp.trees(6, 1)
    with pytest.raises(ab.CompileError, match="changes a model parameter, which every instance shares"):
        sp.writes_a_parameter.run(batch, p, options=STRICT)
    stats = ab.RunStats()
    got = sp.writes_a_parameter.run(batch, p, backend="eager", stats=stats)  # the dynamic tier runs it
    assert "changes a model parameter" in stats.dynamic.reason
    torch.testing.assert_close(got, [sp.writes_a_parameter(t, p) for t in batch], **TOL)


def test_instances_sharing_a_stored_object_are_refused():
    """Two instances holding one node: a batched run cannot keep their values apart, so it says so (never a
    wrong answer)."""
    p = cp.Params()
    a, b = sp.trees(2, 7)
    shared_child = sp.Node(3)
    a.children.append(shared_child)
    b.children.append(shared_child)
    for batch in ([a, a], [a, b]):
        with pytest.raises(ab.InstanceError, match="share a Node object whose `.state` the model stores"):
            sp.childsum_bottom_up.run(copy.deepcopy(batch), p, backend="eager", options=STRICT)


def test_a_field_read_before_it_is_stored_is_refused():
    p = cp.Params()
    batch = sp.trees(3, 2)
    with pytest.raises(ab.InstanceError, match=r"`.h` of a Node is read before the model stored it"):
        sp.reads_before_storing.run(batch, p, backend="eager", options=STRICT)


@pytest.mark.parametrize("name,message", [
    ("stores_a_list", "a list that holds tensors .* stored as `.hs`"),
    ("stores_host_and_tensor", "`.h` holds host data in one place and tensors in another"),
    ("helper_reads_a_field", "`ready` runs as plain host Python and reads `.state`"),
])
def test_fields_the_static_tier_does_not_take(name, message):
    with pytest.raises(ab.CompileError, match=message):
        getattr(sp, name).run(sp.trees(2, 1), cp.Params(), options=STRICT)
