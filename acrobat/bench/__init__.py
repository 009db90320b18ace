"""``acrobat bench``: acrobat against its baselines, its ablation and interpreted control flow (paper §6).

Modules (times in ms throughout):

- ``command``: the subcommand's arguments (``--quick``, ``--out``, ...);
- ``suite``: every (model, size, batch size) configuration with a progress bar; writes the outputs;
- ``compare``: one configuration: output check against the per-instance reference, then timing;
- ``systems`` / ``base``: the systems behind one ``Runner`` interface; ``Unavailable``;
- ``ablation``: ``Options`` switched on one at a time (Fig. 8);
- ``interpreter``: the lowered IR run by a tree-walking interpreter (Table 3);
- ``torchfold_models``, ``dynet_models`` (+ ``dynet_worker``): the baselines' model code;
- ``report`` / ``plots``: JSON, Markdown tables, PNG plots; ``machine``, ``timing``: helpers.
"""
