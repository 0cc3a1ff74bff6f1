"""Train one seq2seq baseline: the `train_seq2seq` stage's task, a thin call into `mwpgen.seq2seq.baseline`.

Settings come from `params.train.seq2seq` (sizes, steps, decoding), `params.keywords.dropout`, the experiment
seed and `params.train.device`, so a flow passes only the data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from prefect import task
from prefect.cache_policies import NO_CACHE

from mwpgen.config.schema import Params
from mwpgen.device import resolve_device
from mwpgen.lm.loading import DEFAULT_MODEL_CACHE
from mwpgen.paths import FoldPaths
from mwpgen.seq2seq.baseline import train_baseline

# Downloaded GloVe lives beside the other model weights, outside the repository (MWPGEN_MODEL_CACHE).
GLOVE_CACHE = DEFAULT_MODEL_CACHE / "glove"


@task(cache_policy=NO_CACHE)
def train_seq2seq_baseline(params: Params, model: str, dataset: str, train_records: Sequence[dict],
                           train_keywords: Mapping[str, Sequence[str]], paths: FoldPaths,
                           validation_records: Sequence[dict] = (),
                           on_log: Callable[[dict], None] | None = None) -> dict:
    """Train one seq2seq baseline; returns train_baseline's summary ({"not_run": reason} without GloVe)."""
    return train_baseline(params.train.seq2seq, model, dataset, train_records, train_keywords, paths.model_dir,
                          keyword_dropout=params.keywords.dropout, seed=params.experiment.seed,
                          device=resolve_device(params.train.device), glove_cache_dir=GLOVE_CACHE,
                          log_every=params.train.log_every, on_log=on_log, validation_records=validation_records,
                          resume_dir=paths.resume_dir)
