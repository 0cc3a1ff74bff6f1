"""Stage `download`: fetch the raw datasets (mirror first, then upstream), sha256-verified."""

from __future__ import annotations

from prefect import flow, get_run_logger

from flows.common import PROJECT_ROOT, params_or_exit, run_stage, stage_args
from mwpgen.config.schema import DownloadParams
from mwpgen.data.fetch import resolve_mirror
from mwpgen.data.sources import sources_for
from mwpgen.io import write_json
from tasks.download import fetch_source
from tracking.runs import stage_run

RAW = PROJECT_ROOT / "data" / "raw"
MANIFEST = PROJECT_ROOT / "metrics" / "download.json"


@flow(name="download")
def download(params: DownloadParams) -> dict:
    log = get_run_logger()
    mirror = resolve_mirror(params.mirror, PROJECT_ROOT)
    with stage_run("download") as run:
        run.params({**params.model_dump(), "mirror_resolved": str(mirror)})
        task = fetch_source.with_options(retries=params.retries)
        fetched = [task(src, RAW, mirror, params.timeout_s) for src in sources_for(params.datasets)]
        manifest = {
            f.source.path: {"sha256": f.source.sha256, "bytes": f.bytes, "origin": f.origin, "url": f.source.url}
            for f in fetched
        }
        for path, info in manifest.items():
            log.info("%s: %s (%d bytes)", path, info["origin"], info["bytes"])
        write_json(MANIFEST, manifest)
        run.metrics({"files": len(fetched), "bytes": sum(f.bytes for f in fetched),
                     "from_url": sum(f.origin == "url" for f in fetched)})
        # The raw files themselves are versioned by DVC; MLflow gets their manifest (checksums and origins).
        run.artifact(MANIFEST)
    return manifest


if __name__ == "__main__":
    run_stage(download, params_or_exit(stage_args(__doc__).params).download,
              failed_metrics=[PROJECT_ROOT / "metrics" / "download.json"])
