"""The consistency judge: does a generated problem encode the equation it was asked for?

One vocabulary throughout: blind readings come in three parts, `train` (fits a learned judge), `validation` (chooses
its seed, form and threshold, and chose the rule) and `test` (only measures).

- `rule.py`: the rule (the evaluator's parse is the equation, and a reader's surface checks pass);
- `model.py`: the learned judge (a linear head on one hidden layer of an LM), `saved.py` what its folder holds,
  `verdicts.py` its verdict from p (gated by the rule or not);
- `fit.py`: fitting its weights; `choose.py`: fitting on train readings, choosing on validation ones, and adopting it
  only where it beats the rule (stage train_judge);
- `measure.py`: AUC, precision at recall, precision and recall of verdicts with bootstrap intervals (stages
  train_judge and measure_judge);
- `readings.py`: the one reader of the blind readings in data/labels, by part.

The modules are imported one by one (nothing here imports them): a stage depends only on the ones it runs, and reading
a judge folder (`saved.py`) needs no torch.
"""
