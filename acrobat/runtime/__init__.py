"""The runtime: runs a batch of instances of a compiled program, batching across them (paper §4, §5).

It takes one ``Plan`` from the compiler and imports nothing from
``acrobat.analysis`` or ``acrobat.codegen`` (``tests/test_layers.py``).

Modules:

- ``plan``: the hand-off: ``Plan`` (entry, prologue, blocks, base depth, fibers,
  result layout), ``BlockCode``, and what compiled code hands over at run time
  (``Form``, ``RowSpec``, the kernel JIT's ``Tracer``/``KernelGraph``); a leaf;
- ``executor``: ``Runtime``: DFG construction by the skeleton, then execution
  group by group in (phase, depth) order (§4, §4.1); the ``Backend`` and
  ``BlockKernel`` protocols it consumes;
- ``dfg``: DFG nodes grouped by (phase, depth, block) as they are added, handles,
  ``ValueTable``; the one module that calls the native part (``acrobat._native``);
- ``fibers``: instances on fibers for tensor-dependent control flow (§4.2);
- ``backend``: backends by name and the ``auto`` choice; ``eager``: ``vmap``
  op by op; ``compiled``: TorchInductor kernels with fused gathers (§5);
  ``segments``: reductions over per-instance lists, on every backend;
- ``gather`` (§5.2), ``arena`` (arena memory), ``threads`` (threads per launch),
  ``stats`` (``RunStats``, the batching report).

Call hierarchy of one run: ``Runtime.run`` -> ``plan.entry`` per instance (adds
nodes: ``Runtime.group``/``segment``, inlined in the skeleton) -> ``flush`` ->
``run_group`` -> ``kernels[id](group, rt)`` -> ``results``.
"""
