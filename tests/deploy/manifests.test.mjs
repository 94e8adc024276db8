// Static checks of deploy/ that need no cluster and no container engine (run by ctest as
// deploy.manifests):
//  - the kustomizations render (`kubectl kustomize` where kubectl exists, else a reading of
//    their resources), and every built-in Kubernetes object passes its OpenAPI schema
//    (types, required fields, enums; kubernetes-models);
//  - the Deployment keeps the server's contract: probes on /health and /live, a grace
//    period above preStop + drain timeout, the restricted security context, an emptyDir
//    /tmp, a read-only /models, resources, Prometheus annotations on the serving port;
//  - Service, PodDisruptionBudget, HPA, InferencePool, Endpoint Picker and HTTPRoute point
//    at each other and at metrics the server exports (README.md, API.md);
//  - compose and the Dockerfile agree with the same contract, and compose passes
//    `docker-compose config` (Debian's docker-compose, installed by scripts/install-deps.sh).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import * as models from 'kubernetes-models';
import { parse, parseAllDocuments } from 'yaml';

const ROOT = process.env.SPILLWAY_SOURCE_DIR
  ?? resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const DEPLOY = join(ROOT, 'deploy');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'PersistentVolume',
  'CustomResourceDefinition', 'StorageClass']);

function onPath(name) {
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/bin', '/usr/local/bin'])) {
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  }
  return null;
}
const kubectl = () => onPath('kubectl');

// What `kustomize build` does for the features these kustomizations use (resources,
// namespace, labels without selectors, images).
function renderWithoutKubectl(dir) {
  const k = parse(readFileSync(join(dir, 'kustomization.yaml'), 'utf8'));
  const objects = [];
  for (const resource of k.resources) {
    for (const doc of parseAllDocuments(readFileSync(join(dir, resource), 'utf8'))) {
      const obj = doc.toJS();
      if (obj) objects.push(obj);
    }
  }
  for (const obj of objects) {
    if (k.namespace && !CLUSTER_SCOPED.has(obj.kind)) obj.metadata.namespace = k.namespace;
    for (const { pairs } of k.labels ?? []) obj.metadata.labels = { ...obj.metadata.labels, ...pairs };
    for (const c of obj.spec?.template?.spec?.containers ?? []) {
      const image = (k.images ?? []).find((i) => i.name === c.image);
      if (image) c.image = `${image.newName}:${image.newTag}`;
    }
  }
  return objects;
}

function render(dir) {
  const bin = kubectl();
  if (!bin) return renderWithoutKubectl(dir);
  const out = execFileSync(bin, ['kustomize', dir], { encoding: 'utf8', env: { ...process.env, KUBECONFIG: '/dev/null' } });
  return parseAllDocuments(out).map((d) => d.toJS()).filter((o) => o);
}

function modelClass(apiVersion, kind) {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  const key = group === '' ? version
    : group.split('.').map((part, i) => (i === 0 ? part : part[0].toUpperCase() + part.slice(1))).join('');
  const ns = group === '' ? models.v1 : models[key]?.[version];
  return ns?.[kind];
}

const base = render(join(DEPLOY, 'k8s'));
const gie = render(join(DEPLOY, 'k8s', 'inference-extension'));
const find = (objects, kind, name) => {
  const obj = objects.find((o) => o.kind === kind && (!name || o.metadata.name === name));
  assert.ok(obj, `no ${kind} ${name ?? ''}`);
  return obj;
};
const deployment = find(base, 'Deployment', 'spillway');
const podSpec = deployment.spec.template.spec;
const container = podSpec.containers.find((c) => c.name === 'spillway');
const env = Object.fromEntries(container.env.filter((e) => 'value' in e).map((e) => [e.name, e.value]));
const httpPort = container.ports.find((p) => p.name === 'http');
const matches = (selector, labels) => Object.entries(selector).every(([k, v]) => labels[k] === v);

// Names in README.md's tables: `spillway_*` metrics and `SPILLWAY_*` variables.
const documentedMetrics = new Set(README.match(/spillway_[a-z0-9_]+|vllm:[a-z_]+/g));
const documentedEnv = new Set(README.match(/SPILLWAY_[A-Z0-9_]+/g));

test('every built-in Kubernetes object passes its schema', () => {
  let checked = 0;
  for (const obj of [...base, ...gie]) {
    const Model = modelClass(obj.apiVersion, obj.kind);
    if (!Model) {
      assert.ok(/inference\.networking|gateway\.networking/.test(obj.apiVersion), `no schema for ${obj.apiVersion} ${obj.kind}`);
      continue;
    }
    assert.doesNotThrow(() => new Model(obj).validate(), `${obj.kind}/${obj.metadata.name}`);
    checked += 1;
  }
  assert.ok(checked >= 12, `${checked} objects checked`);
  // The schema check itself rejects a broken object.
  const broken = structuredClone(deployment);
  broken.spec.template.spec.containers[0].ports[0].containerPort = 'http';
  assert.throws(() => new models.apps.v1.Deployment(broken).validate());
});

test('namespaced objects land in the spillway namespace', () => {
  for (const obj of [...base, ...gie]) {
    if (CLUSTER_SCOPED.has(obj.kind)) continue;
    assert.equal(obj.metadata.namespace, 'spillway', `${obj.kind}/${obj.metadata.name}`);
  }
  assert.equal(find(base, 'Namespace').metadata.name, 'spillway');
});

test('probes follow the lifecycle: /health for startup and readiness, /live for liveness', () => {
  assert.equal(container.startupProbe.httpGet.path, '/health');
  assert.equal(container.readinessProbe.httpGet.path, '/health');
  assert.equal(container.livenessProbe.httpGet.path, '/live');
  for (const probe of [container.startupProbe, container.readinessProbe, container.livenessProbe]) {
    assert.ok([httpPort.name, httpPort.containerPort].includes(probe.httpGet.port));
  }
  // The startup probe allows a long model load before liveness takes over.
  const startupSeconds = container.startupProbe.periodSeconds * container.startupProbe.failureThreshold;
  assert.ok(startupSeconds >= 300, `${startupSeconds} s`);
});

test('the grace period covers preStop and the drain timeout', () => {
  const preStop = container.lifecycle.preStop.exec.command;
  assert.equal(preStop[0], 'sleep');
  const drain = Number(env.SPILLWAY_DRAIN_TIMEOUT);
  assert.ok(drain > 0);
  assert.ok(podSpec.terminationGracePeriodSeconds >= Number(preStop[1]) + drain + 1,
    `${podSpec.terminationGracePeriodSeconds} < ${preStop[1]} + ${drain}`);
});

test('security context: non-root, no escalation, no capabilities, read-only root, emptyDir /tmp', () => {
  assert.equal(podSpec.securityContext.runAsNonRoot, true);
  assert.ok(podSpec.securityContext.runAsUser > 0);
  assert.equal(podSpec.securityContext.seccompProfile.type, 'RuntimeDefault');
  const sc = container.securityContext;
  assert.equal(sc.allowPrivilegeEscalation, false);
  assert.equal(sc.readOnlyRootFilesystem, true);
  assert.deepEqual(sc.capabilities.drop, ['ALL']);
  assert.equal(sc.capabilities.add, undefined);
  const mount = (path) => container.volumeMounts.find((m) => m.mountPath === path);
  const volume = (name) => podSpec.volumes.find((v) => v.name === name);
  assert.ok(volume(mount('/tmp').name).emptyDir, '/tmp is an emptyDir');
  assert.ok(env.SPILLWAY_DEMO_MODEL === undefined || env.SPILLWAY_DEMO_MODEL.startsWith('/tmp/'));
  assert.equal(mount('/models').readOnly, true);
  assert.ok(volume(mount('/models').name).persistentVolumeClaim);
  const claim = volume(mount('/models').name).persistentVolumeClaim.claimName;
  find(base, 'PersistentVolumeClaim', claim);
});

test('resources are requested and limited', () => {
  for (const kind of ['requests', 'limits']) {
    assert.ok(container.resources[kind].cpu, `${kind}.cpu`);
    assert.ok(container.resources[kind].memory, `${kind}.memory`);
  }
});

test('configuration is SPILLWAY_* variables the README documents', () => {
  assert.equal(env.SPILLWAY_HOST, '0.0.0.0');
  assert.equal(Number(env.SPILLWAY_PORT), httpPort.containerPort);
  for (const e of container.env) {
    assert.ok(documentedEnv.has(e.name), `${e.name} is not in README.md`);
  }
  const commented = [...readFileSync(join(DEPLOY, 'k8s', 'deployment.yaml'), 'utf8').matchAll(/name: (SPILLWAY_[A-Z_]+)/g)];
  for (const [, name] of commented) assert.ok(documentedEnv.has(name), `${name} is not in README.md`);
});

test('Prometheus annotations name the serving port and /metrics', () => {
  const a = deployment.spec.template.metadata.annotations;
  assert.equal(a['prometheus.io/scrape'], 'true');
  assert.equal(Number(a['prometheus.io/port']), httpPort.containerPort);
  assert.equal(a['prometheus.io/path'], '/metrics');
});

test('Service, PodDisruptionBudget and HPA select the Deployment', () => {
  const podLabels = deployment.spec.template.metadata.labels;
  const service = find(base, 'Service', 'spillway');
  assert.ok(matches(service.spec.selector, podLabels));
  assert.ok([httpPort.name, httpPort.containerPort].includes(service.spec.ports[0].targetPort));
  assert.ok(matches(find(base, 'PodDisruptionBudget').spec.selector.matchLabels, podLabels));
  const hpa = find(base, 'HorizontalPodAutoscaler');
  assert.equal(hpa.spec.scaleTargetRef.kind, 'Deployment');
  assert.equal(hpa.spec.scaleTargetRef.name, deployment.metadata.name);
});

test('the HPA scales on waiting requests, a metric the server exports', () => {
  const hpa = find(base, 'HorizontalPodAutoscaler');
  const [metric] = hpa.spec.metrics;
  assert.equal(metric.type, 'Pods');
  assert.equal(metric.pods.metric.name, 'spillway_requests_waiting');
  assert.ok(documentedMetrics.has(metric.pods.metric.name));
  const adapter = readFileSync(join(DEPLOY, 'k8s', 'prometheus-adapter-rules.yaml'), 'utf8');
  assert.match(adapter, new RegExp(`as: ${metric.pods.metric.name}\\b`));
});

test('the InferencePool selects the Spillway pods and names its Endpoint Picker', () => {
  const pool = find(gie, 'InferencePool', 'spillway');
  assert.equal(pool.apiVersion, 'inference.networking.k8s.io/v1');
  assert.ok(matches(pool.spec.selector.matchLabels, deployment.spec.template.metadata.labels));
  assert.deepEqual(pool.spec.targetPorts, [{ number: httpPort.containerPort }]);
  const eppService = find(gie, 'Service', pool.spec.endpointPickerRef.name);
  assert.equal(eppService.spec.ports[0].port, pool.spec.endpointPickerRef.port.number);
  const epp = find(gie, 'Deployment', 'spillway-epp');
  assert.ok(matches(eppService.spec.selector, epp.spec.template.metadata.labels));
  const args = epp.spec.template.spec.containers[0].args;
  assert.ok(args.includes(`--pool-name=${pool.metadata.name}`));
  assert.equal(epp.spec.template.spec.serviceAccountName, find(gie, 'ServiceAccount').metadata.name);
});

test('the Endpoint Picker reads the vLLM aliases the server exports', () => {
  const epp = find(gie, 'Deployment', 'spillway-epp');
  const args = Object.fromEntries(epp.spec.template.spec.containers[0].args.map((a) => a.split(/=(.*)/s).slice(0, 2)));
  const expected = {
    '--total-queued-requests-metric': 'vllm:num_requests_waiting',
    '--total-running-requests-metric': 'vllm:num_requests_running',
    '--kv-cache-usage-percentage-metric': 'vllm:kv_cache_usage_perc',
    '--cache-info-metric': 'vllm:cache_config_info',
  };
  for (const [flag, metric] of Object.entries(expected)) {
    assert.equal(args[flag], metric);
    assert.ok(documentedMetrics.has(metric), `${metric} is not in README.md`);
  }
  assert.equal(args['--lora-info-metric'], '');
  const config = parse(find(gie, 'ConfigMap', 'spillway-epp-config').data['epp-config.yaml']);
  assert.equal(config.kind, 'EndpointPickerConfig');
  const declared = new Set(config.plugins.map((p) => p.name ?? p.type));
  for (const profile of config.schedulingProfiles) {
    for (const { pluginRef } of profile.plugins) assert.ok(declared.has(pluginRef), pluginRef);
  }
  assert.ok(args['--config-file'].startsWith('/config/'));
});

test('the HTTPRoute sends /v1 to the pool', () => {
  const route = find(gie, 'HTTPRoute');
  const [rule] = route.spec.rules;
  assert.equal(rule.matches[0].path.value, '/v1');
  assert.deepEqual(rule.backendRefs.map((b) => [b.group, b.kind, b.name]),
    [['inference.networking.k8s.io', 'InferencePool', find(gie, 'InferencePool').metadata.name]]);
});

// Debian 12's docker-compose (1.29) has the oldest Compose schema in use: a file it accepts
// works with Docker Compose v2 and podman-compose too (a top-level `name:` it rejects).
test('compose: the file passes `docker-compose config` (the Compose 1.29 schema)', (t) => {
  const bin = onPath('docker-compose');
  if (!bin) {
    t.skip('docker-compose is not installed (scripts/install-deps.sh installs it)');
    return;
  }
  execFileSync(bin, ['-f', 'compose.yaml', 'config', '-q'], { cwd: DEPLOY, encoding: 'utf8', stdio: 'pipe' });
});

test('compose: drain-aware stop, healthcheck on /health, mounted configs exist', () => {
  const compose = parse(readFileSync(join(DEPLOY, 'compose.yaml'), 'utf8'));
  const spillway = compose.services.spillway;
  assert.equal(spillway.build.dockerfile, 'deploy/Dockerfile');
  const grace = Number(String(spillway.stop_grace_period).replace(/s$/, ''));
  assert.ok(grace > Number(spillway.environment.SPILLWAY_DRAIN_TIMEOUT), `${grace}`);
  assert.match(spillway.healthcheck.test.join(' '), /\/health/);
  assert.equal(spillway.read_only, true);
  assert.deepEqual(spillway.cap_drop, ['ALL']);
  for (const name of Object.keys(spillway.environment)) assert.ok(documentedEnv.has(name), name);
  // podman-compose 1.0 (Debian 12) leaves `${VAR:-}` (an empty default) unexpanded.
  const strings = (v) => (typeof v === 'string' ? [v]
    : v && typeof v === 'object' ? Object.values(v).flatMap(strings) : []);
  for (const value of strings(compose.services)) {
    assert.doesNotMatch(value, /\$\{\w+:?-\}/, 'an empty ${VAR:-} default: podman-compose 1.0 passes it on literally');
  }
  for (const service of ['prometheus', 'grafana']) {
    for (const volume of compose.services[service].volumes) {
      const source = volume.split(':')[0];
      if (source.startsWith('.')) assert.ok(existsSync(join(DEPLOY, source)), `${service}: ${source}`);
    }
  }
  const prometheus = parse(readFileSync(join(DEPLOY, 'prometheus', 'prometheus.yml'), 'utf8'));
  const target = prometheus.scrape_configs.find((j) => j.job_name === 'spillway').static_configs[0].targets[0];
  assert.equal(target, 'spillway:8080');
  const datasource = parse(readFileSync(join(DEPLOY, 'grafana', 'provisioning', 'datasources', 'prometheus.yaml'), 'utf8'));
  assert.equal(datasource.datasources[0].url, 'http://prometheus:9090');
  const dashboard = JSON.parse(readFileSync(join(DEPLOY, 'grafana', 'dashboards', 'spillway.json'), 'utf8'));
  const titles = dashboard.panels.map((p) => p.title.toLowerCase()).join('|');
  for (const topic of ['request rate', 'time to first token', 'inter-token', 'queue', 'kv cache',
    'prefix cache hit rate', 'streaming bandwidth', 'resident layers', 'memory available and pressure']) {
    assert.ok(titles.includes(topic), `the dashboard has no "${topic}" panel`);
  }
});

test('Dockerfile: non-root runtime, /models, HEALTHCHECK on /health, exec-form entrypoint', () => {
  const dockerfile = readFileSync(join(DEPLOY, 'Dockerfile'), 'utf8');
  const stages = dockerfile.split(/^FROM /m).slice(1);
  assert.equal(stages.length, 2, 'a build stage and a runtime stage');
  const runtime = stages[1];
  assert.doesNotMatch(runtime, /build-essential|-dev\b|cmake/);
  assert.match(runtime, /^USER 10001:10001$/m);
  assert.equal(podSpec.securityContext.runAsUser, 10001);
  assert.match(runtime, /^VOLUME \["\/models"\]$/m);
  assert.match(runtime, /^HEALTHCHECK [\s\S]*\/health/m);
  assert.match(runtime, /^ENTRYPOINT \["\/usr\/local\/bin\/spillway", "serve"\]$/m);
  assert.match(runtime, /^STOPSIGNAL SIGTERM$/m);
  for (const [, name] of runtime.matchAll(/(SPILLWAY_[A-Z_]+)=/g)) assert.ok(documentedEnv.has(name), name);
});
