// Validates Kubernetes manifests offline: every document against the
// Kubernetes OpenAPI schema of its kind (kubernetes-models, generated from the
// Kubernetes API's OpenAPI spec) or, for the Prometheus Operator's kinds,
// against the schema of its CustomResourceDefinition
// (@kubernetes-models/prometheus-operator, generated from the operator's CRDs);
// then steptrace's own rules: no privileged container, no privilege
// escalation, capabilities dropped, a read-only root filesystem, and no
// `job` or `pid` label in a manifest.
//   node validate.mjs FILE.yaml...     exit 0 when every document passes
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { Namespace, Service } from "kubernetes-models/v1";
import { DaemonSet } from "kubernetes-models/apps/v1";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { PodMonitor, ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";

const kinds = {};
for (const m of [Namespace, Service, DaemonSet, NetworkPolicy, PodMonitor, ServiceMonitor])
  kinds[`${m.apiVersion}/${m.kind}`] = m;

function policy(doc, where) {
  const problems = [];
  const labels = (o) => Object.keys((o && o.labels) || {});
  for (const l of [...labels(doc.metadata), ...labels(doc.spec?.template?.metadata)])
    if (l === "job" || l === "pid") problems.push(`${where}: label ${l}`);
  const pod = doc.spec?.template?.spec;
  if (pod) {
    for (const c of [...(pod.containers || []), ...(pod.initContainers || [])]) {
      const sc = c.securityContext || {};
      const at = `${where} container ${c.name}`;
      if (sc.privileged !== false) problems.push(`${at}: privileged must be false`);
      if (sc.allowPrivilegeEscalation !== false) problems.push(`${at}: allowPrivilegeEscalation must be false`);
      if (sc.readOnlyRootFilesystem !== true) problems.push(`${at}: readOnlyRootFilesystem must be true`);
      const drop = sc.capabilities?.drop || [];
      if (!drop.includes("ALL")) problems.push(`${at}: capabilities.drop must include ALL`);
      for (const cap of sc.capabilities?.add || [])
        if (cap === "SYS_ADMIN" || cap === "ALL") problems.push(`${at}: adds ${cap}`);
    }
    if (pod.automountServiceAccountToken !== false) problems.push(`${where}: automountServiceAccountToken must be false`);
  }
  return problems;
}

let failures = 0, checked = 0;
for (const file of process.argv.slice(2)) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  docs.forEach((d, i) => {
    const where = `${file}#${i}`;
    if (d.errors.length) {
      console.log(`${where}: YAML: ${d.errors.map((e) => e.message).join("; ")}`);
      failures++;
      return;
    }
    const doc = d.toJS();
    if (doc === null) return;
    const model = kinds[`${doc.apiVersion}/${doc.kind}`];
    if (!model) {
      console.log(`${where}: no schema for ${doc.apiVersion} ${doc.kind}`);
      failures++;
      return;
    }
    checked++;
    const problems = [];
    try {
      new model(doc).validate();
    } catch (e) {
      const details = (e.errors || []).map((x) => `${x.instancePath || "/"} ${x.message}`);
      problems.push(`schema: ${details.length ? details.join("; ") : e.message}`);
    }
    problems.push(...policy(doc, `${doc.kind} ${doc.metadata?.name}`));
    for (const p of problems) console.log(`${where}: ${p}`);
    if (problems.length) failures++;
    else console.log(`${where}: ${doc.kind} ${doc.metadata?.name}: ok`);
  });
}
console.log(`${checked} documents checked, ${failures} failed`);
process.exit(failures || !checked ? 1 : 0);
