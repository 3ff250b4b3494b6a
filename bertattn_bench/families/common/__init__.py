"""What several families share and none owns (issue 44: no family imports another family's module; the layout test
``tests/test_layout.py`` forbids it). Import from the module that holds a name, never from this package (it imports
nothing, so a family's cache key follows only the shared modules it reads):

* :mod:`.surface_stats`: Clark §3's per-head statistics of the segments and the pass over them (surface, norms,
  clustering, Clark's figures);
* :mod:`.dependency_stats`: UD trees as Clark's SD arcs, the offset baselines and the dependency reducer (the
  dependency family, the probes' best-head baseline, Clark's figures);
* :mod:`.tree_decoding`: MAX and MST (ufal.chu_liu_edmonds) trees from one head's word-level map and their UUAS (trees);
* :mod:`.head_maps`: the masks of a batch's maps and their ±1-neighbour mass, and the detector-heads test on it
  (patterns, coref);
* :mod:`.sweep_scoring`: a GLUE sweep's configurations scored against the undisabled model, and the paired bounds on
  their gains (disable, prune, framenet);
* :mod:`.head_importance`: Michel's head importance from gate gradients and the pruning order (prune, speedup);
* :mod:`.arct_runs`: the per-seed values of a table of ARCT runs (arct, arct_ft).
"""
