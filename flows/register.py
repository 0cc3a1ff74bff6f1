"""Stage `register`: the served model of each (dataset, fold) the default run trains -- `serve.model`, ours tuned on
blind readings, where the run tunes that fold; ours elsewhere -- logged as an MLflow pyfunc model (generator, selector
settings, co-trained mwp2eq, the fold's learned judge when train_judge made one, signature, input example;
tracking/pyfunc_model.py) beside the run that trained it, and registered as `mwpgen-ours` with the alias
`<dataset>-fold<k>`.

Serve it with `mlflow models serve -m models:/mwpgen-ours/<version> --env-manager local` (or `@arithmetic-fold0`);
`mwpgen generate --model models:/mwpgen-ours/<version>` generates with the same model on the command line.
Writes metrics/register.json: the model, URI, version, model id and run of each registered fold.
"""

from __future__ import annotations

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.common import PROJECT_ROOT, fold_paths, params_or_exit, run_stage, stage_args
from mwpgen.config.schema import Params
from mwpgen.io import write_json
from mwpgen.judge.saved import has_judge
from mwpgen.registry import served_model
from tracking.pyfunc_model import log_ours_model, training_run_id
from tracking.runs import fold_run

METRICS = PROJECT_ROOT / "metrics" / "register.json"
log_model = task(log_ours_model, name="log_and_register", cache_policy=NO_CACHE)


@flow(name="register")
def register(params: Params) -> dict:
    log = get_run_logger()
    registered = []
    for dataset in params.experiment.datasets:
        for fold in params.experiment.folds:
            model = served_model(params, dataset, fold)
            bundle = fold_paths(model, dataset, fold).model_dir
            if not (bundle / "ours.json").exists():
                stage = "train_ours" if model == "ours" else "tune"
                raise FileNotFoundError(f"no trained {model} at {bundle}; run `dvc repro {stage}` first")
            judge = fold_paths(model, dataset, fold).judge
            judge = judge if has_judge(judge) else None  # a fold without readings: the served model keeps the rule
            run_id = training_run_id(model, dataset, fold)
            if run_id is None:  # trained elsewhere (e.g. pulled from the DVC cache): file it under the fold's run
                log.warning("no MLflow run in this store trained %s; logging it under the fold run", bundle)
                with fold_run(model, dataset, fold, "register") as run:
                    info = log_model(bundle, run.run_id, dataset, fold, judge_dir=judge)
            else:
                info = log_model(bundle, run_id, dataset, fold, judge_dir=judge)
            log.info("%s/fold%d: %s from %s (%s), run %s, judge %s", dataset, fold, info["model_uri"], model,
                     info["alias_uri"], info["run_id"], info["judge"])
            registered.append({"model": model, **info})
    result = {"registered": registered}
    write_json(METRICS, result)
    return result


if __name__ == "__main__":
    args = stage_args(__doc__)
    run_stage(register, params_or_exit(args.params), failed_metrics=[METRICS])
