"""``numasim fit EXPERIMENT``: which model reproduces a published table.

The papers' simulators are not public. Instead of guessing their rules, a fit searches the named
modelling assumptions (discrete) and at most three continuous parameters with documented
physical ranges for the setting whose simulated absolute turnarounds — baseline and policy
columns both — are closest to the experiment's published ``[reference]`` table, and writes the
result as a fitted profile, ``fitted:EXPERIMENT``, usable with ``--assume`` on any experiment.

```
experiment + [reference] ──► space.build      what is searched (discrete × continuous)
                           ├► objective.target the published numbers
                           ▼
          search.fit ── objective.Evaluator ── experiment.run_batch (common random numbers)
                           ▼
          FitResult: best setting, residuals, profile per parameter, cost
                           ▼
          profile.write ──► OUT/fitted-EXP.json + the user's fitted profiles
          --assume fitted:EXP ──► profile.apply
```

A fitted profile is inferred, never a source: it is never a default, the ``paper`` profile stays
grounded in sentences only, and a table it was fitted on is not evidence of agreement (predict
the others). docs/assumptions.md, "Fitting a model to a published table".
"""

from numasim.fit.objective import Evaluator, Target, target
from numasim.fit.search import FitResult, fit
from numasim.fit.space import CONTINUOUS, Setting, Space, build

__all__ = ["CONTINUOUS", "Evaluator", "FitResult", "Setting", "Space", "Target", "build", "fit",
           "target"]  # fmt: skip
