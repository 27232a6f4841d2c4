// deploy/kubernetes/ (kustomize), checked without a cluster or kubectl (issue 30 item 4): every
// manifest parses; every container of the repository's image runs a dist/ entry whose command
// line its service's OWN flag parser accepts; every port and probe is one that service serves
// (the flag's port; /health, /ready, /metrics where it answers them); Services select their pods
// and reach named ports; every config file a flag names is a ConfigMap key the kustomization
// generates from a repo file, and that file passes the service's parser; the engines file's DNS
// entry names the vLLM headless Service at the ports the vLLM pods publish on; requests cover the
// RSS measured under load (docs/incoming/deploy.md).
//
//   router-svc ──gRPC──▶ directory-svc-N.directory-svc:grpc_port      (StatefulSet, headless Service)
//   directory-svc ──DNS──▶ vllm-llama.<namespace>.svc.cluster.local   (headless Service → vLLM pods)
//                 ──HTTP :8000, ZMQ :5557/:5558──▶ vLLM --port, --kv-events-config
//   meta-svc ──redis://redis:6379──▶ redis (StatefulSet)
import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, parse } from 'yaml';
import { loadMetaConfig } from '../../../meta-svc/config/load-meta-config.js';
import { parseDirectoryFlags, type DirectoryFlags } from '../../../shared/config/directory-flags.js';
import { parseKvEventsConfig } from '../../../shared/config/kv-events-config.js';
import { parseMetaFlags, type MetaFlags } from '../../../shared/config/meta-flags.js';
import { parseRouterFlags, type RouterFlags } from '../../../shared/config/router-flags.js';
import { readTokenizerFiles } from '../../../shared/tokenize/tokenizer-files.js';
import { parseModelsFile } from '../../../shared/config/models-file.js';
import { parseEnginesFile } from '../../../directory-svc/engines/engines-file.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const KDIR = join(ROOT, 'deploy/kubernetes');
/** WORKDIR of the image (Dockerfile): relative paths in commands are relative to it. */
const WORKDIR = '/app';
const IMAGE = 'kv-cache-router';

/** Peak RSS measured under load (bench/deploy/service-rss.ts, docs/incoming/deploy.md), MiB. */
const MEASURED_PEAK_RSS_MIB: Readonly<Record<string, number>> = { 'directory-svc': 216, 'router-svc': 326, 'meta-svc': 86 };

/** The HTTP paths each service answers on its --http_port, and the source that routes them. */
const SERVED_PATHS: Readonly<Record<string, { source: string; paths: readonly string[] }>> = {
  'directory-svc': { source: 'directory-svc/http/directory-http-server.ts', paths: ['/health', '/metrics'] },
  'router-svc': { source: 'router-svc/http/router-http-server.ts', paths: ['/health', '/ready', '/metrics'] },
  'meta-svc': { source: 'meta-svc/http/meta-http-server.ts', paths: ['/health', '/metrics'] },
};

/** The --kv-events-config engines.md §4 gives for vLLM (issue 30). */
const VLLM_KV_EVENTS_CONFIG = { enable_kv_cache_events: true, publisher: 'zmq', endpoint: 'tcp://*:5557', replay_endpoint: 'tcp://*:5558', topic: '', buffer_steps: 10000 };

interface Port {
  name?: string;
  containerPort?: number;
  port?: number;
  targetPort?: number | string;
}
interface Probe {
  httpGet?: { path: string; port: number | string };
  tcpSocket?: { port: number | string };
  grpc?: { port: number };
  exec?: { command: string[] };
  failureThreshold?: number;
  periodSeconds?: number;
}
interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  ports?: Port[];
  env?: { name: string; value?: string }[];
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  volumeMounts?: { name: string; mountPath: string }[];
}
interface PodSpec {
  containers: Container[];
  volumes?: { name: string; configMap?: { name: string } }[];
}
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: {
    replicas?: number;
    serviceName?: string;
    clusterIP?: string;
    selector?: { matchLabels?: Record<string, string> } & Record<string, string>;
    ports?: Port[];
    template?: { metadata: { labels: Record<string, string>; annotations?: Record<string, string> }; spec: PodSpec };
    scaleTargetRef?: { kind: string; name: string };
    minReplicas?: number;
    maxReplicas?: number;
    metrics?: { type: string; resource?: { name: string } }[];
  };
}
interface Kustomization {
  namespace: string;
  resources: string[];
  images?: { name: string; newName?: string; newTag?: string }[];
  configMapGenerator: { name: string; files: string[]; options?: { disableNameSuffixHash?: boolean; labels?: Record<string, string> } }[];
}

const kustomization = parse(readFileSync(join(KDIR, 'kustomization.yaml'), 'utf8')) as Kustomization;
const objects: K8sObject[] = kustomization.resources.flatMap((file) =>
  parseAllDocuments(readFileSync(join(KDIR, file), 'utf8')).map((d) => {
    if (d.errors.length > 0) throw new Error(`${file}: ${d.errors.map((e) => e.message).join('; ')}`);
    return d.toJS() as K8sObject;
  }),
);

function find(kind: string, name: string): K8sObject {
  const o = objects.find((x) => x.kind === kind && x.metadata.name === name);
  if (o === undefined) throw new Error(`no ${kind} ${name} in deploy/kubernetes`);
  return o;
}

const workloads = (): K8sObject[] => objects.filter((o) => o.kind === 'Deployment' || o.kind === 'StatefulSet');

/** The workload running service `svc` (named like it) and its one container. */
function workload(svc: string): { w: K8sObject; c: Container } {
  const w = workloads().find((x) => x.metadata.name === svc);
  if (w === undefined) throw new Error(`no workload ${svc}`);
  const cs = w.spec!.template!.spec.containers;
  expect(cs, `${svc}: one container`).to.have.length(1);
  return { w, c: cs[0]! };
}

/** `key=file` or `file` entries of a generated ConfigMap, as key → repo path. */
function generatedKeys(configMap: string): Map<string, string> {
  const g = kustomization.configMapGenerator.find((x) => x.name === configMap);
  if (g === undefined) throw new Error(`ConfigMap ${configMap} is not generated by the kustomization`);
  return new Map(
    g.files.map((f) => {
      const eq = f.indexOf('=');
      return eq < 0 ? [basename(f), join(KDIR, f)] : [f.slice(0, eq), join(KDIR, f.slice(eq + 1))];
    }),
  );
}

/** The repo file a path inside a container is: a generated ConfigMap key under one of its mounts. */
function mountedFile(w: K8sObject, c: Container, path: string): string {
  const mount = (c.volumeMounts ?? []).find((m) => path.startsWith(`${m.mountPath}/`));
  expect(mount, `${w.metadata.name}: ${path} is under a volume mount`).to.not.equal(undefined);
  const volume = (w.spec!.template!.spec.volumes ?? []).find((v) => v.name === mount!.name);
  expect(volume?.configMap, `${w.metadata.name}: volume ${mount!.name} is a ConfigMap`).to.not.equal(undefined);
  const key = path.slice(mount!.mountPath.length + 1);
  const file = generatedKeys(volume!.configMap!.name).get(key);
  expect(file, `${w.metadata.name}: ${path} is key ${key} of ConfigMap ${volume!.configMap!.name}`).to.not.equal(undefined);
  expect(existsSync(file!), `${file} exists`).to.equal(true);
  return file!;
}

/** A path inside the image (under WORKDIR) → the repo path the Dockerfile puts there. */
function imagePath(path: string): string {
  const rel = path.startsWith(`${WORKDIR}/`) ? path.slice(WORKDIR.length + 1) : path;
  expect(rel.startsWith('/'), `${path} is inside the image's ${WORKDIR}`).to.equal(false);
  return join(ROOT, rel);
}

function portOf(c: Container, port: number | string): number {
  if (typeof port === 'number') {
    expect((c.ports ?? []).map((p) => p.containerPort), `${c.name} declares port ${port}`).to.include(port);
    return port;
  }
  const p = (c.ports ?? []).find((x) => x.name === port);
  expect(p, `${c.name} has a port named ${port}`).to.not.equal(undefined);
  return p!.containerPort!;
}

const argsOf = (c: Container): string[] => (c.command ?? []).slice(2);
const flagValue = (args: readonly string[], name: string): string | undefined => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);

function directoryFlags(): DirectoryFlags {
  const args = argsOf(workload('directory-svc').c);
  const parsed = parseDirectoryFlags(args);
  if (parsed.kind === 'help') throw new Error('directory-svc command is --help');
  return parsed.flags;
}

function routerFlags(): RouterFlags {
  const args = argsOf(workload('router-svc').c);
  const parsed = parseRouterFlags(args);
  if (parsed.kind === 'help') throw new Error('router-svc command is --help');
  return parsed.flags;
}

function metaFlags(): MetaFlags {
  const parsed = parseMetaFlags(argsOf(workload('meta-svc').c));
  if (parsed.kind === 'help') throw new Error('meta-svc command is --help');
  return parsed.flags;
}

/** The Service selecting `w`'s pods (exactly one, with ports). */
function serviceOf(w: K8sObject): K8sObject {
  const labels = w.spec!.template!.metadata.labels;
  const matching = objects.filter((s) => s.kind === 'Service' && Object.entries(s.spec!.selector ?? {}).every(([k, v]) => labels[k] === v));
  expect(matching.map((s) => s.metadata.name), `one Service selects ${w.metadata.name}`).to.have.length(1);
  return matching[0]!;
}

/** A `--name=value` argument of the vLLM container. */
function vllmArg(name: string): string | undefined {
  return flagValue(workload('vllm-llama').c.args ?? [], name);
}

/** Kubernetes memory quantity (Mi, Gi, plain bytes) in MiB. */
function mib(q: string): number {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi)?$/.exec(q);
  expect(m, `memory quantity ${q}`).to.not.equal(null);
  const n = Number(m![1]);
  return m![2] === 'Gi' ? n * 1024 : m![2] === 'Mi' ? n : m![2] === 'Ki' ? n / 1024 : n / (1024 * 1024);
}

describe('deploy/kubernetes (kustomize), checked without a cluster', () => {
  it('the kustomization lists files that exist, generates its ConfigMaps from files in its own directory, and every object has a unique kind and name', () => {
    for (const f of kustomization.resources) expect(existsSync(join(KDIR, f)), f).to.equal(true);
    for (const g of kustomization.configMapGenerator) {
      for (const [key, file] of generatedKeys(g.name)) {
        expect(existsSync(file), `${g.name}: ${file}`).to.equal(true);
        expect(file.startsWith(`${KDIR}/`), `${g.name}: ${key} comes from inside deploy/kubernetes (kustomize's load restrictor)`).to.equal(true);
      }
    }
    const seen = new Set<string>();
    for (const o of objects) {
      expect(o.apiVersion, `${o.kind} ${o.metadata.name}`).to.be.a('string');
      const id = `${o.kind}/${o.metadata.name}`;
      expect(seen.has(id), `${id} unique`).to.equal(false);
      seen.add(id);
    }
    expect(objects.filter((o) => o.kind === 'Namespace').map((o) => o.metadata.name)).to.deep.equal([kustomization.namespace]);
  });

  it("every container of the repository's image runs `node dist/<entry>.js` from its source, and the image is mapped by the kustomization", () => {
    expect(kustomization.images?.map((i) => i.name)).to.include(IMAGE);
    const ours = workloads().flatMap((w) => w.spec!.template!.spec.containers.filter((c) => c.image === IMAGE).map((c) => ({ w, c })));
    expect(ours.map(({ w }) => w.metadata.name).sort()).to.deep.equal(['directory-svc', 'meta-svc', 'router-svc']);
    for (const { w, c } of ours) {
      expect(c.command?.[0], `${w.metadata.name} runs node`).to.equal('node');
      const m = /^dist\/(.+)\.js$/.exec(c.command?.[1] ?? '');
      expect(m, `${w.metadata.name} entry`).to.not.equal(null);
      expect(existsSync(join(ROOT, `${m![1]}.ts`)), `${m![1]}.ts`).to.equal(true);
      expect(m![1], `${w.metadata.name} runs its own service`).to.equal(`${w.metadata.name}/main`);
      expect(c.args, `${w.metadata.name}: flags in command (the parser reads them all)`).to.equal(undefined);
    }
  });

  it('Services select their pods, reach ports the pods declare, and StatefulSets name a headless Service of their own', () => {
    for (const w of workloads()) {
      const labels = w.spec!.template!.metadata.labels;
      for (const [k, v] of Object.entries(w.spec!.selector!.matchLabels!)) expect(labels[k], `${w.metadata.name} selector ${k}`).to.equal(v);
      const svc = serviceOf(w);
      const c = w.spec!.template!.spec.containers[0]!;
      for (const p of svc.spec!.ports!) portOf(c, p.targetPort ?? p.port!);
      if (w.kind === 'StatefulSet') expect(w.spec!.serviceName, `${w.metadata.name} serviceName`).to.equal(svc.metadata.name);
    }
    expect(serviceOf(find('StatefulSet', 'directory-svc')).spec!.clusterIP, 'directory-svc Service is headless (per-pod names)').to.equal('None');
  });

  it('directory-svc: two replicas, flags parse, its ports are --grpc_port and --http_port, probes hit /health and the gRPC health service', () => {
    const flags = directoryFlags();
    const { w, c } = workload('directory-svc');
    expect(w.kind).to.equal('StatefulSet');
    expect(w.spec!.replicas).to.equal(2);
    expect(portOf(c, 'grpc')).to.equal(flags.grpcPort);
    expect(portOf(c, 'http')).to.equal(flags.httpPort);
    expect(c.readinessProbe?.grpc?.port, 'readiness: gRPC health on --grpc_port').to.equal(flags.grpcPort);
    expect(c.livenessProbe?.httpGet?.path).to.equal('/health');
    expect(portOf(c, c.livenessProbe!.httpGet!.port)).to.equal(flags.httpPort);
  });

  it('directory-svc: --etcd_addr= (empty) runs no etcd discovery (engines.md §6)', () => {
    expect(flagValue(argsOf(workload('directory-svc').c), 'etcd_addr')).to.equal('');
    expect(directoryFlags().etcdAddr).to.deep.equal([]);
  });

  it('directory-svc: its kv-events config is a generated ConfigMap key that validates, with no etcd discovery block', () => {
    const { w, c } = workload('directory-svc');
    const kv = parseKvEventsConfig(readFileSync(mountedFile(w, c, directoryFlags().kvEventsConfigFile), 'utf8'));
    expect(kv.discovery, 'no etcd discovery').to.equal(null);
    expect(kv.streams, 'engines come from the engines file').to.deep.equal([]);
  });

  it("directory-svc: the engines file is a ConfigMap mounted without subPath and without a hash suffix, so an edit reaches the running directories' reload (engines.md §4)", () => {
    const { w, c } = workload('directory-svc');
    mountedFile(w, c, directoryFlags().enginesFile);
    const mount = c.volumeMounts!.find((m) => directoryFlags().enginesFile.startsWith(`${m.mountPath}/`))!;
    expect(mount).to.not.have.property('subPath');
    const volume = w.spec!.template!.spec.volumes!.find((v) => v.name === mount.name)!;
    expect(kustomization.configMapGenerator.find((g) => g.name === volume.configMap!.name)?.options?.disableNameSuffixHash).to.equal(true);
  });

  it("engines.md §6: the engines file's DNS entry is the vLLM headless Service's full name, at the ports and block size the vLLM pods use", () => {
    const { w: dw, c: dc } = workload('directory-svc');
    const entries = parseEnginesFile(readFileSync(mountedFile(dw, dc, directoryFlags().enginesFile), 'utf8')).dnsEntries;
    expect(entries).to.have.length(1);
    const e = entries[0]!;
    const { w: vw, c: vc } = workload('vllm-llama');
    const svc = serviceOf(vw);
    expect(svc.spec!.clusterIP, 'headless: one A record per ready pod').to.equal('None');
    expect(e.dns).to.equal(`${svc.metadata.name}.${kustomization.namespace}.svc.cluster.local`);
    expect(e.srv).to.equal(false);
    expect(e.kind).to.equal('vllm');
    const kvConfig = JSON.parse(vllmArg('kv-events-config')!) as typeof VLLM_KV_EVENTS_CONFIG;
    const portAfter = (endpoint: string): number => Number(endpoint.slice(endpoint.lastIndexOf(':') + 1));
    expect(e.port, 'HTTP port = vLLM --port').to.equal(Number(vllmArg('port'))).and.to.equal(portOf(vc, 'http'));
    expect(e.eventPort, 'event_port = the PUB endpoint').to.equal(portAfter(kvConfig.endpoint)).and.to.equal(portOf(vc, 'kv-events'));
    expect(e.replayPort, 'replay_port = the replay endpoint').to.equal(portAfter(kvConfig.replay_endpoint)).and.to.equal(portOf(vc, 'kv-replay'));
    expect(e.topic).to.equal(kvConfig.topic);
    expect(e.blockSize, 'block_size = vLLM --block-size').to.equal(Number(vllmArg('block-size')));
    expect(e.dpSize).to.equal(1);
    for (const p of [e.port!, e.eventPort!, e.replayPort!]) expect(svc.spec!.ports!.map((x) => portOf(vc, x.targetPort!)), `the Service carries ${p}`).to.include(p);
  });

  it('vLLM: --kv-events-config is the engines docs\' JSON (ZMQ publisher, replay endpoint, 10,000 buffered steps), prefix caching on, probes on its --port', () => {
    expect(JSON.parse(vllmArg('kv-events-config')!)).to.deep.equal(VLLM_KV_EVENTS_CONFIG);
    const { c } = workload('vllm-llama');
    expect(c.args).to.include('--enable-prefix-caching');
    for (const probe of [c.readinessProbe, c.livenessProbe, c.startupProbe]) {
      expect(probe?.httpGet?.path).to.equal('/health');
      expect(portOf(c, probe!.httpGet!.port)).to.equal(Number(vllmArg('port')));
    }
    expect(c.resources?.limits?.['nvidia.com/gpu']).to.equal('1');
  });

  it('router-svc: flags parse, --directory_addr lists every directory replica by its StatefulSet name at --grpc_port', () => {
    const flags = routerFlags();
    const dir = find('StatefulSet', 'directory-svc');
    const want = Array.from({ length: dir.spec!.replicas! }, (_, i) => `${dir.metadata.name}-${i}.${dir.spec!.serviceName}:${directoryFlags().grpcPort}`);
    expect(flags.directoryAddr.map((h) => `${h.host}:${h.port}`)).to.deep.equal(want);
    expect(flags.internalApiToken).to.equal(directoryFlags().internalApiToken);
  });

  it('router-svc: its port is --http_port; readiness on /ready, liveness on /health, a startup probe while it waits for the first view', () => {
    const flags = routerFlags();
    const { c } = workload('router-svc');
    expect(portOf(c, 'http')).to.equal(flags.httpPort);
    expect(c.readinessProbe?.httpGet?.path).to.equal('/ready');
    expect(c.livenessProbe?.httpGet?.path).to.equal('/health');
    expect(c.startupProbe?.httpGet?.path).to.equal('/health');
    for (const p of [c.readinessProbe!, c.livenessProbe!, c.startupProbe!]) expect(portOf(c, p.httpGet!.port)).to.equal(flags.httpPort);
    // A directory restart (seconds) must not take every router out of the Service: they route by load meanwhile.
    expect(c.readinessProbe!.failureThreshold! * c.readinessProbe!.periodSeconds!, 'readiness tolerates a stale view for ≥ 60 s').to.be.at.least(60);
  });

  it('router-svc: a HorizontalPodAutoscaler on CPU owns the Deployment, whose pods request CPU', () => {
    const hpa = objects.find((o) => o.kind === 'HorizontalPodAutoscaler')!;
    expect(hpa.spec!.scaleTargetRef).to.include({ kind: 'Deployment', name: 'router-svc' });
    expect(hpa.spec!.minReplicas).to.be.at.least(2);
    expect(hpa.spec!.maxReplicas).to.be.greaterThan(hpa.spec!.minReplicas!);
    expect(hpa.spec!.metrics?.map((m) => m.resource?.name)).to.include('cpu');
    expect(workload('router-svc').c.resources?.requests?.['cpu'], 'CPU utilization is relative to the request').to.be.a('string');
  });

  it('router-svc: --models_file is a generated ConfigMap key that validates, names the vLLM --model, and its tokenizer ships in the image and loads (cache-identity §5)', () => {
    const { w, c } = workload('router-svc');
    const path = flagValue(argsOf(c), 'models_file')!;
    const models = parseModelsFile(readFileSync(mountedFile(w, c, path), 'utf8'));
    expect(models.map((m) => m.model)).to.include(vllmArg('model'));
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    for (const m of models) {
      const dir = imagePath(m.tokenizer);
      const npmName = m.tokenizer.split('/node_modules/')[1]?.split('/').slice(0, 2).join('/');
      expect(Object.keys(pkg.dependencies), `${m.model}: ${npmName} is a production dependency (the image prunes dev ones)`).to.include(npmName);
      expect(readTokenizerFiles(dir, m.chatTemplate === '' ? '' : imagePath(m.chatTemplate)).chatTemplate, `${m.model}: a chat template`).to.not.equal(null);
    }
  });

  it('meta-svc: flags parse, its store is the redis Service at the port Redis serves, its config validates, readiness on /health', () => {
    const flags = metaFlags();
    const { w, c } = workload('meta-svc');
    expect(w.spec!.replicas, 'several replicas on one Redis (kvcm-meta §9.4)').to.be.at.least(2);
    const redis = workload('redis');
    const redisSvc = serviceOf(redis.w);
    expect(flags.store).to.include({ kind: 'redis', host: redisSvc.metadata.name });
    const svcPort = redisSvc.spec!.ports!.find((p) => p.port === (flags.store as { port: number }).port);
    expect(svcPort, `the redis Service serves ${(flags.store as { port: number }).port}`).to.not.equal(undefined);
    const redisArgs = redis.c.command ?? [];
    const redisPort = redisArgs.includes('--port') ? Number(redisArgs[redisArgs.indexOf('--port') + 1]) : 6379;
    expect(portOf(redis.c, svcPort!.targetPort!)).to.equal(redisPort);
    const meta = loadMetaConfig({ configFile: mountedFile(w, c, flags.metaConfigFile), httpPortOverride: flags.httpPort });
    expect(meta.ok, meta.ok ? '' : meta.errors.join('; ')).to.equal(true);
    expect(portOf(c, 'http')).to.equal(flags.httpPort);
    expect(c.readinessProbe?.httpGet?.path).to.equal('/health');
    expect(portOf(c, c.readinessProbe!.httpGet!.port)).to.equal(flags.httpPort);
    expect(portOf(c, c.livenessProbe!.tcpSocket!.port), 'liveness: the port answers (a Redis outage must not restart it)').to.equal(flags.httpPort);
  });

  it('every HTTP probe and scrape annotation of our services names a path the service answers on the port it serves it', () => {
    const httpPort: Record<string, number> = { 'directory-svc': directoryFlags().httpPort, 'router-svc': routerFlags().httpPort, 'meta-svc': metaFlags().httpPort };
    for (const [svc, { source, paths }] of Object.entries(SERVED_PATHS)) {
      const code = readFileSync(join(ROOT, source), 'utf8');
      for (const p of paths) expect(code, `${source} routes ${p}`).to.include(`'${p}'`);
      const { w, c } = workload(svc);
      for (const probe of [c.livenessProbe, c.readinessProbe, c.startupProbe]) {
        if (probe?.httpGet === undefined) continue;
        expect(paths, `${svc} answers ${probe.httpGet.path}`).to.include(probe.httpGet.path);
        expect(portOf(c, probe.httpGet.port)).to.equal(httpPort[svc]);
      }
      const a = w.spec!.template!.metadata.annotations ?? {};
      expect(a['prometheus.io/scrape'], `${svc} is scraped`).to.equal('true');
      expect(Number(a['prometheus.io/port']), `${svc} scrape port`).to.equal(httpPort[svc]);
      expect(paths).to.include(a['prometheus.io/path']);
    }
  });

  it('every container requests CPU and memory and limits memory; our services request at least the RSS measured under load, with a heap cap under the limit', () => {
    for (const w of workloads()) {
      for (const c of w.spec!.template!.spec.containers) {
        const r = c.resources;
        expect(r?.requests?.['cpu'], `${w.metadata.name} cpu request`).to.be.a('string');
        expect(r?.requests?.['memory'], `${w.metadata.name} memory request`).to.be.a('string');
        expect(mib(r!.limits!['memory']!), `${w.metadata.name} memory limit ≥ request`).to.be.at.least(mib(r!.requests!['memory']!));
        const measured = MEASURED_PEAK_RSS_MIB[w.metadata.name];
        if (measured === undefined) continue;
        expect(mib(r!.requests!['memory']!), `${w.metadata.name} requests its measured peak RSS (${measured} MiB)`).to.be.at.least(measured);
        const heap = /--max-old-space-size=(\d+)/.exec((c.env ?? []).find((e) => e.name === 'NODE_OPTIONS')?.value ?? '');
        if (heap !== null) expect(Number(heap[1]), `${w.metadata.name} heap cap below its memory limit`).to.be.below(mib(r!.limits!['memory']!));
      }
    }
  });

  it('the Prometheus rules and the Grafana dashboard ship as ConfigMaps generated from deploy/kubernetes/observability', () => {
    const rules = generatedKeys('kv-cache-router-prometheus-rules');
    const dashboard = generatedKeys('kv-cache-router-grafana-dashboard');
    expect([...rules.values()].map((f) => basename(f))).to.deep.equal(['kv-cache-router.rules.yml']);
    expect([...dashboard.values()].map((f) => basename(f))).to.deep.equal(['kv-cache-router.dashboard.json']);
    expect(kustomization.configMapGenerator.find((g) => g.name === 'kv-cache-router-grafana-dashboard')?.options?.labels).to.include({ grafana_dashboard: '1' });
  });
});
