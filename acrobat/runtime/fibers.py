"""Fibers for tensor-dependent control flow (§4.2), on ``greenlet``.

Each instance runs its skeleton on a fiber. When host code needs a tensor's
value that has not been computed (``_rt.value``), the fiber yields; once
every fiber is blocked, at a phase barrier or done, the runtime executes the
DFG built so far (batched across all fibers) and resumes the blocked ones.
Independent calls (``acrobat.concurrent``) run as child fibers (fork-join),
so the subtrees of one instance keep batching while one of them waits.
A flush runs only up to the earliest awaited group, and of the hoisted
(static-depth) groups only those it needs (``Runtime.flush``): the others
wait for every fiber's nodes, one launch per run.

Grad mode is per fiber, as it is per plain call: PyTorch keeps it per
thread and greenlets share the thread, so a fiber that waits inside
``with torch.no_grad():`` would otherwise leave the scheduler, the
flushes and the other fibers without autograd (and the caller too, once
the fibers' ``with`` exits restore each other's modes out of order).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Sequence

import torch
from greenlet import greenlet

from acrobat.diagnosis import mark_limit
from acrobat.errors import AcrobatError, InstanceError


TorchFunctionState = tuple[Any, list]
"""A thread's torch-function state: ``torch._C._get_torch_function_state()`` and the mode stack."""


def _torch_function_state() -> TorchFunctionState:
    return torch._C._get_torch_function_state(), [
        torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack())]


def _set_torch_function_state(saved: TorchFunctionState) -> None:
    state, modes = saved
    current = _torch_function_state()[1]
    if len(current) != len(modes) or any(a is not b for a, b in zip(current, modes)):
        while torch._C._len_torch_function_stack():
            torch._C._pop_torch_function_stack()
        for m in modes:
            torch._C._push_on_torch_function_stack(m)
    torch._C._set_torch_function_state(state)


class Fiber:
    """One execution context: an instance's skeleton, or one concurrent call of it (``join`` set); ``grad``:
    the grad mode it resumes in (``torch.is_grad_enabled()`` when it last switched out)."""

    __slots__ = ("glet", "inst", "phase", "join", "grad")

    def __init__(self, glet: greenlet, inst: int, phase: int, join: "Join | None", grad: bool):
        self.glet = glet
        self.inst = inst
        self.phase = phase
        self.join = join
        self.grad = grad


class Join:
    """One ``fork``: the fiber that forked, its child fibers still running, and whether it waits for them."""

    __slots__ = ("fiber", "pending", "waiting")

    def __init__(self, fiber: Fiber, pending: int):
        self.fiber = fiber
        self.pending = pending
        self.waiting = False


class FiberScheduler:
    """Runs instance fibers until all are done, flushing the DFG whenever none can go on.

    ``rt`` is the ``Runtime``: the scheduler sets ``rt.dfg.inst``/``rt.dfg.phase``
    for the running fiber and calls ``rt.flush()`` to execute pending groups.
    With a ``recorder`` (the dynamic tier, ``acrobat.runtime.dynamic``), its
    operator recording is on while a fiber runs and off in between (flushes
    run torch operators of the runtime's own).
    """

    def __init__(self, rt: Any, recorder: Any = None, host_state: Callable[[], tuple] | None = None):
        self.rt = rt
        self.recorder = recorder
        self.host_state = host_state  # the shared arguments' host-state fingerprint (dynamic tier), or None
        self.main = greenlet.getcurrent()
        self.ready: deque[Fiber] = deque()
        self.waiting: dict[int, list[Fiber]] = {}  # key of a pending group (dfg.group_key) -> fibers waiting for it
        self.at_barrier: list[tuple[int, Fiber]] = []  # (phase wanted, fiber)
        self.current: Fiber | None = None

    def run(self, entry: Callable, base: int, instances: Sequence, shared: tuple) -> list:
        """Run every instance's ``entry`` on its own fiber; their results, in order.

        Raises:
            AcrobatError: fibers wait for values no pending operator will produce.
        """
        results: list[Any] = [None] * len(instances)
        for i, inst in enumerate(instances):
            def body(i: int = i, inst: Any = inst) -> None:
                results[i] = entry(self.rt, base, inst, *shared)[0]
            self.ready.append(Fiber(greenlet(body, parent=self.main), i, 0, None, torch.is_grad_enabled()))
        dfg = self.rt.dfg  # the running instance and phase live on the DFG (native attributes: no property calls)
        ready = self.ready
        state = self.host_state
        run_state = _torch_function_state() if self.recorder is not None else None  # see _yield
        run_grad = torch.is_grad_enabled()  # the caller's grad mode: flushes run in it (module docstring)
        owner: int | None = None  # the instance that changed shared host state: it runs alone until done
        held: deque[Fiber] = deque()  # the other instances' fibers, while it does
        started: set[int] = set()
        while True:
            while ready:
                fiber = ready.popleft()
                if owner is not None and fiber.inst != owner:
                    held.append(fiber)
                    continue
                self.current = fiber
                started.add(fiber.inst)
                before = state() if state is not None else None
                dfg.inst = fiber.inst
                dfg.phase = fiber.phase
                torch._C._set_grad_enabled(fiber.grad)
                try:
                    if self.recorder is not None:
                        self.recorder.active = True
                        try:
                            fiber.glet.switch()
                        finally:
                            self.recorder.active = False
                            _set_torch_function_state(run_state)
                    else:
                        fiber.glet.switch()
                finally:
                    fiber.grad = torch.is_grad_enabled()
                    torch._C._set_grad_enabled(run_grad)
                fiber.phase = dfg.phase
                if state is not None:
                    owner = self._owner(owner, fiber, before, state(), started, results)
                    if owner is not None and fiber.join is None and fiber.glet.dead:  # the owner is done
                        owner = None
                        ready.extend(held)
                        held.clear()
                join = fiber.join
                if join is not None and fiber.glet.dead:
                    join.pending -= 1
                    if join.pending == 0 and join.waiting:
                        ready.append(join.fiber)
            if self.waiting:
                # Run only up to the earliest awaited group and wake the fibers it serves: fibers
                # that ran ahead wait, so the laggards catch up and their operators batch together.
                upto = min(self.waiting)
                if upto not in self.rt.groups:
                    stuck = sorted({f.inst for fibers in self.waiting.values() for f in fibers})
                    raise AcrobatError(f"instances {stuck} wait for tensor values that no pending operator "
                                       "computes: a fiber can never resume")
                self.rt.flush(upto)
                for key in [k for k in self.waiting if k not in self.rt.groups]:  # computed now
                    ready.extend(self.waiting.pop(key))
            elif self.at_barrier:
                wanted = min(k for k, _ in self.at_barrier)
                ready.extend(f for k, f in self.at_barrier if k == wanted)
                self.at_barrier = [(k, f) for k, f in self.at_barrier if k != wanted]
            else:
                return results

    def _owner(self, owner: int | None, fiber: Fiber, before: tuple, after: tuple, started: set[int],
               results: list) -> int | None:
        """The instance that must run alone after ``fiber``'s slice: plain Python runs instances one after
        another, so an instance that changes host state every instance shares (``model.outputs = []``,
        ``self.outputs.append(h)``) runs alone from then until it is done; the others wait.

        Raises:
            InstanceError: the change came after other instances had started and not finished: they may
                have seen the state this one changes, which plain calls would not; acrobat cannot tell.
        """
        if owner is not None or before == after:
            return owner
        from acrobat.runtime.dynamic import changed_names
        others = sorted(i for i in started if i != fiber.inst and self._running(i))
        if others:
            names = ", ".join(f"`{n}`" for n in changed_names(before, after))
            raise mark_limit(InstanceError(
                f"instance {fiber.inst} changed host state every instance shares ({names} of a shared argument) "
                f"while instances {others[:5]} were part-way through: plain calls run one instance after "
                "another, so batched they could see each other's changes. Keep per-instance results in local "
                "variables or on the instance's own objects, or reset the shared state before any value read "
                "(`if x.sum() > 0`, `.item()`) of the program", fiber.inst))
        return fiber.inst

    def _running(self, inst: int) -> bool:
        """Whether instance ``inst`` has a fiber not done (ready, waiting or at a barrier)."""
        return any(f.inst == inst for f in self.ready) or any(
            f.inst == inst for fs in self.waiting.values() for f in fs) or any(
            f.inst == inst for _, f in self.at_barrier)

    def _yield(self) -> None:
        """Switch the running fiber back to the scheduler; resumed, restore its torch-function state.

        PyTorch keeps the torch-function state (``DisableTorchFunction``, the mode stack, which a
        ``TorchFunctionMode`` handler pops while it runs) per thread, and greenlets share the thread: a
        fiber that waits inside such a context would leave the others running in it (in the dynamic tier,
        their operators would run unrecorded, one instance at a time). The scheduler runs every fiber in
        the state the run started with; a fiber gets its own back when it resumes.
        """
        saved = _torch_function_state() if self.recorder is not None else None
        self.main.switch()
        if saved is not None:
            _set_torch_function_state(saved)

    def wait(self, key: int) -> None:
        """Block the running fiber until the pending group with ``key`` has run."""
        assert self.current is not None
        fibers = self.waiting.get(key)
        if fibers is None:
            self.waiting[key] = [self.current]
        else:
            fibers.append(self.current)
        self._yield()

    def barrier(self, phase: int) -> None:
        """Block the running fiber until no fiber is left in an earlier phase (§4.1)."""
        assert self.current is not None
        if phase > 0:
            self.at_barrier.append((phase, self.current))
            self._yield()

    def fork(self, thunks: Sequence[Callable[[], Any]]) -> list:
        """Run ``thunks`` concurrently; their results once all are done.

        All but the last run as child fibers; the last runs on the running
        fiber itself (one greenlet fewer per fork), which then waits for the
        children still running.
        """
        parent = self.current
        assert parent is not None
        results: list[Any] = [None] * len(thunks)
        join = Join(parent, len(thunks) - 1)
        for j, thunk in enumerate(thunks[:-1]):
            def body(j: int = j, thunk: Callable = thunk) -> None:
                results[j] = thunk()
            self.ready.append(Fiber(greenlet(body, parent=self.main), parent.inst, self.rt.dfg.phase, join,
                                    torch.is_grad_enabled()))
        results[-1] = thunks[-1]()
        if join.pending:
            join.waiting = True
            self._yield()
        return results
