"""Validate the engine recipes offline against vendored JSON schemas.

    python scripts/check_recipes.py              # check deploy/k8s/*.yaml and deploy/github/*.yml
    python scripts/check_recipes.py --self-test  # prove the check can fail: broken copies must be rejected

* Every document of deploy/k8s/shard-job.yaml whose kind is Job is validated against the
  strict Kubernetes 1.37 batch/v1 Job schema (deploy/schemas/k8s-v1.37-job-batch-v1.json,
  unknown fields rejected); the shard Job must be Indexed with completions == parallelism ==
  the N of its `--shard "${JOB_COMPLETION_INDEX}/N"`.
* deploy/github/shards.yml is validated against SchemaStore's GitHub workflow schema
  (deploy/schemas/github-workflow.json); its matrix must list 0..N-1 and the run step must
  pass `--shard "${{ matrix.shard }}/…"`.

Needs PyYAML and jsonschema (the CI step's venv). Exit status 0 when everything is valid
(and, with --self-test, every broken copy was rejected), 1 otherwise.
"""

import copy
import json
import os
import re
import sys

import jsonschema
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
K8S_SCHEMA = os.path.join(ROOT, "deploy/schemas/k8s-v1.37-job-batch-v1.json")
GH_SCHEMA = os.path.join(ROOT, "deploy/schemas/github-workflow.json")
K8S = os.path.join(ROOT, "deploy/k8s/shard-job.yaml")
GH = os.path.join(ROOT, "deploy/github/shards.yml")


def schema_errors(schema, doc):
    cls = jsonschema.validators.validator_for(schema)
    v = cls(schema, format_checker=None)
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in sorted(v.iter_errors(doc), key=lambda e: list(map(str, e.path)))]


def check_k8s(docs, schema):
    errors = []
    jobs = [d for d in docs if isinstance(d, dict) and d.get("kind") == "Job"]
    if not jobs:
        return ["no Job in the Kubernetes recipe"]
    for job in jobs:
        name = job.get("metadata", {}).get("name", "?")
        errors += [f"Job {name}: {e}" for e in schema_errors(schema, job)]
    shard_jobs = [j for j in jobs if j.get("spec", {}).get("completionMode") == "Indexed"]
    if len(shard_jobs) != 1:
        return errors + ["expected exactly one Indexed Job (the shards)"]
    spec = shard_jobs[0]["spec"]
    text = json.dumps(spec.get("template", {}))
    m = re.search(r'--shard \\"\$\{JOB_COMPLETION_INDEX\}/(\d+)\\"', text)
    if not m:
        errors.append("the shard Job does not pass --shard \"${JOB_COMPLETION_INDEX}/N\"")
    elif not (spec.get("completions") == spec.get("parallelism") == int(m.group(1))):
        errors.append(f"completions {spec.get('completions')}, parallelism {spec.get('parallelism')} "
                      f"and --shard …/{m.group(1)} must be equal")
    return errors


def check_github(doc, schema):
    errors = [f"workflow: {e}" for e in schema_errors(schema, doc)]
    try:
        job = doc["jobs"]["shard"]
        shards = job["strategy"]["matrix"]["shard"]
        runs = " ".join(s.get("run", "") for s in job["steps"])
    except (KeyError, TypeError) as e:
        return errors + [f"workflow: no shard job with a matrix ({e})"]
    if shards != list(range(len(shards))):
        errors.append(f"matrix.shard must be 0..N-1, is {shards}")
    if f'--shard "${{{{ matrix.shard }}}}/' not in runs:
        errors.append('the shard job does not pass --shard "${{ matrix.shard }}/N"')
    return errors


def load(path):
    with open(path) as f:
        docs = list(yaml.safe_load_all(f))
    # YAML 1.1 reads the key `on` as the boolean true; GitHub reads it as the string.
    for d in docs:
        if isinstance(d, dict) and True in d:
            d["on"] = d.pop(True)
    return docs


def main():
    k8s_schema = json.load(open(K8S_SCHEMA))
    gh_schema = json.load(open(GH_SCHEMA))
    k8s_docs, gh_doc = load(K8S), load(GH)[0]
    errors = check_k8s(k8s_docs, k8s_schema) + check_github(gh_doc, gh_schema)
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    if errors:
        return 1
    print(f"recipes valid: {os.path.relpath(K8S, ROOT)} (Kubernetes 1.37 strict Job schema), "
          f"{os.path.relpath(GH, ROOT)} (SchemaStore github-workflow)")
    if "--self-test" not in sys.argv:
        return 0

    def job(docs):
        return next(d for d in docs if d.get("kind") == "Job")

    broken_k8s = []
    d = copy.deepcopy(k8s_docs); job(d)["spec"]["completionMode"] = "Indexd"
    broken_k8s.append(("misspelt completionMode value", d))
    d = copy.deepcopy(k8s_docs); job(d)["spec"]["paralelism"] = 4
    broken_k8s.append(("unknown field spec.paralelism", d))
    d = copy.deepcopy(k8s_docs); del job(d)["spec"]["template"]
    broken_k8s.append(("missing spec.template", d))
    d = copy.deepcopy(k8s_docs); job(d)["spec"]["completions"] = "four"
    broken_k8s.append(("completions not an integer", d))
    d = copy.deepcopy(k8s_docs); job(d)["spec"]["completions"] = 3
    broken_k8s.append(("completions != --shard N", d))
    broken_gh = []
    d = copy.deepcopy(gh_doc); d["jobs"]["shard"]["runs_on"] = d["jobs"]["shard"].pop("runs-on")
    broken_gh.append(("runs-on misspelt", d))
    d = copy.deepcopy(gh_doc); d["jobs"]["merge"]["needs"] = {"shard": True}
    broken_gh.append(("needs of the wrong type", d))
    d = copy.deepcopy(gh_doc); d["jobs"]["shard"]["strategy"]["matrix"]["shard"] = [1, 2, 3, 4]
    broken_gh.append(("1-based matrix", d))
    failed = 0
    for what, docs in broken_k8s:
        errs = check_k8s(docs, k8s_schema)
        print(f"self-test: Kubernetes recipe with {what}: {'rejected' if errs else 'ACCEPTED'}"
              + (f" ({errs[0][:110]})" if errs else ""))
        failed += not errs
    for what, doc in broken_gh:
        errs = check_github(doc, gh_schema)
        print(f"self-test: workflow with {what}: {'rejected' if errs else 'ACCEPTED'}"
              + (f" ({errs[0][:110]})" if errs else ""))
        failed += not errs
    if failed:
        print(f"error: {failed} broken recipe(s) were accepted: the check cannot fail", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
