#!/usr/bin/env python3
"""The pod templates of deploy/k8s as Pods that `podman kube play` runs.

Reads the output of `kubectl kustomize deploy/k8s` on stdin, writes YAML on stdout:

- each Job becomes a Pod named as the Job (and so as its headless Service: the name every
  TF_CONFIG lists), with the template's labels, annotations and spec unchanged
  (restartPolicy, securityContext, env with TF_CONFIG and OPENBLAS_NUM_THREADS, command,
  probes, resources, volumes), except:
    - `ports` are dropped: Podman publishes every containerPort on the host, and five pods
      all declaring 2222 and 8080 would collide there; in Kubernetes they are informational
      (the probes name their port by number);
    - the PersistentVolumeClaim is renamed to --claim (a volume of this run's own);
- the ConfigMap and the PersistentVolumeClaim are kept (Podman makes a volume of each);
- the Services are left out: Podman has none, and the pods, named as the Services, find
  each other by name through the Podman network's DNS instead.

Podman does not run Jobs (`kube play` takes Pods, Deployments and volumes), which is why
the templates are extracted.
"""

import argparse
import sys

import yaml


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claim", required=True, help="name for the checkpoint volume")
    args = parser.parse_args()

    out = []
    for doc in yaml.safe_load_all(sys.stdin):
        if not doc:
            continue
        kind = doc["kind"]
        if kind == "ConfigMap":
            out.append(doc)
        elif kind == "PersistentVolumeClaim":
            doc["metadata"]["name"] = args.claim
            out.append(doc)
        elif kind == "Job":
            template = doc["spec"]["template"]
            spec = template["spec"]
            for container in spec["containers"]:
                container.pop("ports", None)
            for volume in spec.get("volumes", []):
                if "persistentVolumeClaim" in volume:
                    volume["persistentVolumeClaim"]["claimName"] = args.claim
            metadata = {"name": doc["metadata"]["name"]}
            for key in ("labels", "annotations"):
                if template.get("metadata", {}).get(key):
                    metadata[key] = template["metadata"][key]
            out.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
        elif kind == "Service":
            continue
        else:
            sys.exit(f"k8s_pods.py: unexpected kind {kind}")
    yaml.safe_dump_all(out, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
