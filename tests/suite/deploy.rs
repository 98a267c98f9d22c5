//! The deploy files of `deploy/` checked against the code they deploy: the routes the probes
//! hit, the default port, the variables `src/config/mod.rs` reads and `.env.example` documents, the
//! drain timeout the grace periods must cover, the shipped prompts. And `zaguan healthcheck`,
//! the image's health check, against the real binary.
//!
//! `deploy/k8s/configmap-prompts.yaml` is generated from `prompts/`: when the folder changes,
//! `UPDATE_DEPLOY=1 cargo test --test deploy` rewrites it.

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize as _;
use serde_norway::Value;

use common::{free_port, zaguan};

// ---- the code's side of the contract -----------------------------------------------------------

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    let path = root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {relative}: {e}"))
}

/// The configuration of an empty environment: the code's defaults.
fn defaults() -> zaguan::config::Config {
    zaguan::config::Config::from_vars(HashMap::new()).expect("the defaults are valid")
}

fn default_port() -> u16 {
    defaults().bind_addr.port()
}

/// How long `zaguan serve` drains after SIGTERM: the code's default, or the one `.env.example`
/// documents (the value a deployment copying it runs with), whichever is longer.
fn drain_timeout() -> Duration {
    let documented = env_example()
        .get("ZAGUAN_DRAIN_TIMEOUT")
        .map(|v| duration(v, ".env.example ZAGUAN_DRAIN_TIMEOUT"))
        .unwrap_or_default();
    defaults().drain_timeout.max(documented)
}

/// `.env.example`: variable → documented value.
fn env_example() -> BTreeMap<String, String> {
    read(".env.example")
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect()
}

/// A variable a deploy file sets must be one the service reads and `.env.example` documents.
fn assert_known_variable(name: &str, file: &str) {
    assert!(
        zaguan::config::VARIABLES.contains(&name),
        "{file} sets {name}, which src/config/mod.rs does not read (VARIABLES)"
    );
    assert!(
        env_example().contains_key(name),
        "{file} sets {name}, which .env.example does not document"
    );
}

/// The variables the configuration holds as secrets: those read with `env.secret(…)` in
/// `src/config/mod.rs` and `src/config/env.rs`, and `MONGODB_URI` (it may carry a password).
fn secret_variables() -> BTreeSet<String> {
    let source = read("src/config/mod.rs") + &read("src/config/env.rs");
    let mut names: BTreeSet<String> = source
        .split(".secret(\"")
        .skip(1)
        .filter_map(|rest| rest.split_once('"').map(|(name, _)| name.to_owned()))
        .collect();
    names.insert("MONGODB_URI".to_owned());
    names
}

/// The paths of the router in `src/app.rs`.
fn routes() -> BTreeSet<String> {
    read("src/app.rs")
        .split(".route(")
        .skip(1)
        .filter_map(|rest| rest.trim_start().strip_prefix('"'))
        .filter_map(|rest| rest.split_once('"').map(|(path, _)| path.to_owned()))
        .collect()
}

fn duration(value: &str, what: &str) -> Duration {
    humantime::parse_duration(value.trim())
        .unwrap_or_else(|e| panic!("{what}: `{value}` is not a duration: {e}"))
}

// ---- YAML ----------------------------------------------------------------------------------

/// Every non-empty document of a YAML file.
fn yaml_documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_norway::Deserializer::from_str(&text)
        .map(|document| {
            Value::deserialize(document)
                .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()))
        })
        .filter(|document| !document.is_null())
        .collect()
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(yaml_files(&path));
        } else if path
            .extension()
            .is_some_and(|ext| ext == "yaml" || ext == "yml")
        {
            files.push(path);
        }
    }
    files.sort();
    files
}

fn yaml(relative: &str) -> Value {
    let mut documents = yaml_documents(&root().join(relative));
    assert_eq!(documents.len(), 1, "{relative}: expected one document");
    documents.remove(0)
}

fn text<'a>(value: &'a Value, what: &str) -> &'a str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what}: expected a string, found {value:?}"))
}

fn number(value: &Value, what: &str) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("{what}: expected a number, found {value:?}"))
}

fn list<'a>(value: &'a Value, what: &str) -> &'a [Value] {
    value
        .as_sequence()
        .unwrap_or_else(|| panic!("{what}: expected a list, found {value:?}"))
}

/// A mapping of strings to strings (ConfigMap data, labels, a map-form `environment`).
fn strings(value: &Value, what: &str) -> BTreeMap<String, String> {
    value
        .as_mapping()
        .unwrap_or_else(|| panic!("{what}: expected a mapping, found {value:?}"))
        .iter()
        .map(|(key, value)| {
            let key = text(key, what).to_owned();
            let value = text(value, &format!("{what}.{key} (quote it)")).to_owned();
            (key, value)
        })
        .collect()
}

// ---- Kubernetes ------------------------------------------------------------------------------

const NAME_LABEL: &str = "app.kubernetes.io/name";

/// Every object of `deploy/k8s` but the kustomization, with the file it is in.
fn k8s_objects() -> Vec<(String, Value)> {
    yaml_files(&root().join("deploy/k8s"))
        .into_iter()
        .filter(|path| !path.ends_with("kustomization.yaml"))
        .flat_map(|path| {
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            yaml_documents(&path)
                .into_iter()
                .map(move |object| (file.clone(), object))
        })
        .collect()
}

/// The one object of `kind`.
fn k8s(kind: &str) -> Value {
    let mut found: Vec<Value> = k8s_objects()
        .into_iter()
        .filter(|(_, object)| object["kind"].as_str() == Some(kind))
        .map(|(_, object)| object)
        .collect();
    assert_eq!(found.len(), 1, "expected one {kind} in deploy/k8s");
    found.remove(0)
}

fn k8s_named(kind: &str, name: &str) -> Value {
    k8s_objects()
        .into_iter()
        .map(|(_, object)| object)
        .find(|object| {
            object["kind"].as_str() == Some(kind)
                && object["metadata"]["name"].as_str() == Some(name)
        })
        .unwrap_or_else(|| panic!("no {kind} named {name} in deploy/k8s"))
}

fn zaguan_container(deployment: &Value) -> Value {
    list(
        &deployment["spec"]["template"]["spec"]["containers"],
        "containers",
    )
    .iter()
    .find(|container| container["name"].as_str() == Some("zaguan"))
    .expect("a container named zaguan")
    .clone()
}

/// A `port` of a probe or Service: a number, or the name of a container port.
fn resolve_port(port: &Value, container: &Value, what: &str) -> u64 {
    if let Some(number) = port.as_u64() {
        return number;
    }
    let name = text(port, what);
    list(&container["ports"], "container ports")
        .iter()
        .find(|p| p["name"].as_str() == Some(name))
        .map(|p| number(&p["containerPort"], "containerPort"))
        .unwrap_or_else(|| panic!("{what}: `{name}` names no container port"))
}

/// Every label of `selector` (a `matchLabels` or a Service selector) is on `labels`.
fn selects(selector: &Value, labels: &Value, what: &str) {
    let selector = strings(selector, what);
    let labels = strings(labels, "pod labels");
    assert!(
        !selector.is_empty(),
        "{what} is empty: it would select every pod"
    );
    for (key, value) in &selector {
        assert_eq!(
            labels.get(key),
            Some(value),
            "{what} wants {key}={value}, the pods have {labels:?}"
        );
    }
}

#[test]
fn every_yaml_file_under_deploy_parses() {
    let files = yaml_files(&root().join("deploy"));
    assert!(files.len() >= 9, "{files:?}");
    for file in files {
        assert!(
            !yaml_documents(&file).is_empty(),
            "{} is empty",
            file.display()
        );
    }
}

#[test]
fn kubernetes_objects_are_labelled_and_listed_in_the_kustomization() {
    let objects = k8s_objects();
    for (file, object) in &objects {
        for field in ["apiVersion", "kind"] {
            text(&object[field], &format!("{file}: {field}"));
        }
        assert_eq!(
            object["metadata"]["labels"][NAME_LABEL].as_str(),
            Some("zaguan"),
            "{file}: {} has no label {NAME_LABEL}: zaguan",
            object["kind"].as_str().unwrap_or_default()
        );
    }
    let kustomization = yaml("deploy/k8s/kustomization.yaml");
    assert_eq!(kustomization["kind"].as_str(), Some("Kustomization"));
    let listed: BTreeSet<&str> = list(&kustomization["resources"], "resources")
        .iter()
        .map(|r| text(r, "a resource"))
        .collect();
    let expected: BTreeSet<&str> = objects
        .iter()
        .map(|(file, _)| file.as_str())
        .filter(|file| *file != "secret.example.yaml")
        .collect();
    assert_eq!(
        listed, expected,
        "kustomization.yaml must list every manifest but the secret example"
    );
}

#[test]
fn probes_and_ports_match_the_routes_and_the_default_port() {
    let routes = routes();
    let port = u64::from(default_port());
    let deployment = k8s("Deployment");
    let container = zaguan_container(&deployment);

    let http = list(&container["ports"], "container ports")
        .iter()
        .find(|p| p["name"].as_str() == Some("http"))
        .expect("a container port named http");
    assert_eq!(
        number(&http["containerPort"], "containerPort"),
        port,
        "the container port is not the default port of ZAGUAN_BIND_ADDR"
    );

    for (probe, path) in [
        ("readinessProbe", Some("/readyz")),
        ("livenessProbe", Some("/healthz")),
        ("startupProbe", None),
    ] {
        let get = &container[probe]["httpGet"];
        if get.is_null() && path.is_none() {
            continue;
        }
        let actual = text(&get["path"], probe);
        if let Some(path) = path {
            assert_eq!(actual, path, "{probe}");
        }
        assert!(
            routes.contains(actual),
            "{probe} GETs {actual}, not a route of src/app.rs ({routes:?})"
        );
        assert_eq!(
            resolve_port(&get["port"], &container, probe),
            port,
            "{probe}"
        );
    }

    let service = k8s("Service");
    assert_eq!(service["spec"]["type"].as_str(), Some("ClusterIP"));
    selects(
        &service["spec"]["selector"],
        &deployment["spec"]["template"]["metadata"]["labels"],
        "the Service selector",
    );
    let service_port = &list(&service["spec"]["ports"], "Service ports")[0];
    assert_eq!(number(&service_port["port"], "Service port"), 80);
    assert!(
        service_port["targetPort"].is_string(),
        "the Service's targetPort should name the container port"
    );
    assert_eq!(
        resolve_port(&service_port["targetPort"], &container, "targetPort"),
        port
    );

    let config = strings(
        &k8s_named("ConfigMap", "zaguan-config")["data"],
        "zaguan-config",
    );
    let bind: std::net::SocketAddr = config["ZAGUAN_BIND_ADDR"].parse().unwrap();
    assert_eq!(
        u64::from(bind.port()),
        port,
        "zaguan-config ZAGUAN_BIND_ADDR"
    );
    assert!(
        bind.ip().is_unspecified(),
        "probes come from outside the pod"
    );
}

#[test]
fn the_deployment_is_redundant_locked_down_and_drains_before_it_is_killed() {
    let deployment = k8s("Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = zaguan_container(&deployment);
    assert!(number(&deployment["spec"]["replicas"], "replicas") >= 2);
    selects(
        &deployment["spec"]["selector"]["matchLabels"],
        &deployment["spec"]["template"]["metadata"]["labels"],
        "the Deployment selector",
    );

    // Grace period > preStop sleep + drain timeout.
    let grace = number(
        &pod["terminationGracePeriodSeconds"],
        "terminationGracePeriodSeconds",
    );
    let pre_stop = &container["lifecycle"]["preStop"];
    let sleep = if let Some(seconds) = pre_stop["sleep"]["seconds"].as_u64() {
        seconds
    } else {
        let command = list(&pre_stop["exec"]["command"], "preStop exec command");
        let words: Vec<&str> = command.iter().map(|w| text(w, "preStop")).collect();
        let last = words.last().expect("a preStop command");
        assert!(words.join(" ").contains("sleep"), "preStop: {words:?}");
        last.trim_start_matches("sleep ").parse().expect("sleep N")
    };
    let config = strings(
        &k8s_named("ConfigMap", "zaguan-config")["data"],
        "zaguan-config",
    );
    let drain = duration(
        &config["ZAGUAN_DRAIN_TIMEOUT"],
        "zaguan-config ZAGUAN_DRAIN_TIMEOUT",
    )
    .max(drain_timeout());
    assert!(
        Duration::from_secs(grace) > Duration::from_secs(sleep) + drain,
        "terminationGracePeriodSeconds {grace} must exceed the preStop sleep {sleep}s + drain {drain:?}"
    );

    // Non-root, read-only, no capabilities.
    let non_root = pod["securityContext"]["runAsNonRoot"].as_bool() == Some(true)
        || container["securityContext"]["runAsNonRoot"].as_bool() == Some(true);
    assert!(non_root, "runAsNonRoot is not set");
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"].as_bool(), Some(true));
    assert_eq!(security["allowPrivilegeEscalation"].as_bool(), Some(false));
    let dropped: Vec<&str> = list(&security["capabilities"]["drop"], "capabilities.drop")
        .iter()
        .map(|c| text(c, "capability"))
        .collect();
    assert_eq!(dropped, ["ALL"]);
    if let Some(uid) = pod["securityContext"]["runAsUser"].as_u64() {
        assert_ne!(uid, 0);
    }

    // The HPA scales on CPU utilization, which is relative to the request.
    let resources = &container["resources"];
    text(&resources["requests"]["cpu"], "requests.cpu");
    text(&resources["requests"]["memory"], "requests.memory");
    text(&resources["limits"]["memory"], "limits.memory");
    assert!(
        read("deploy/k8s/deployment.yaml").contains("# measured: see docs/scaling.md"),
        "the resources should point at the measurements"
    );

    // Configuration: the ConfigMap then the Secret; the prompts mounted where the config says.
    let sources = list(&container["envFrom"], "envFrom");
    assert_eq!(
        sources[0]["configMapRef"]["name"].as_str(),
        Some("zaguan-config")
    );
    assert_eq!(sources[1]["secretRef"]["name"].as_str(), Some("zaguan"));
    k8s_named("Secret", "zaguan");
    let mount = list(&container["volumeMounts"], "volumeMounts")
        .iter()
        .find(|m| m["name"].as_str() == Some("prompts"))
        .expect("a prompts volume mount");
    assert_eq!(
        mount["mountPath"].as_str(),
        Some(config["ZAGUAN_PROMPTS_DIR"].as_str()),
        "the prompts are mounted where ZAGUAN_PROMPTS_DIR points"
    );
    assert!(
        mount["subPath"].is_null(),
        "a subPath mount never sees ConfigMap updates: no hot reload"
    );
    let volume = list(&pod["volumes"], "volumes")
        .iter()
        .find(|v| v["name"].as_str() == Some("prompts"))
        .expect("a prompts volume");
    assert_eq!(volume["configMap"]["name"].as_str(), Some("zaguan-prompts"));
    k8s_named("ConfigMap", "zaguan-prompts");
}

#[test]
fn the_autoscaler_and_the_disruption_budget_cover_the_deployment() {
    let deployment = k8s("Deployment");
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    let hpa = k8s("HorizontalPodAutoscaler");
    assert_eq!(hpa["apiVersion"].as_str(), Some("autoscaling/v2"));
    let target = &hpa["spec"]["scaleTargetRef"];
    assert_eq!(target["kind"].as_str(), Some("Deployment"));
    assert_eq!(target["apiVersion"].as_str(), Some("apps/v1"));
    assert_eq!(target["name"], deployment["metadata"]["name"]);
    let min = number(&hpa["spec"]["minReplicas"], "minReplicas");
    let max = number(&hpa["spec"]["maxReplicas"], "maxReplicas");
    assert!(min >= 2 && max >= min, "min {min} max {max}");
    let metric = &list(&hpa["spec"]["metrics"], "metrics")[0];
    assert_eq!(metric["resource"]["name"].as_str(), Some("cpu"));
    assert_eq!(
        metric["resource"]["target"]["averageUtilization"].as_u64(),
        Some(70)
    );

    let pdb = k8s("PodDisruptionBudget");
    assert_eq!(pdb["apiVersion"].as_str(), Some("policy/v1"));
    selects(
        &pdb["spec"]["selector"]["matchLabels"],
        pod_labels,
        "the PodDisruptionBudget selector",
    );
    let min_available = number(&pdb["spec"]["minAvailable"], "minAvailable");
    assert!(min_available >= 1 && min_available < min);
}

#[test]
fn configmap_and_secret_hold_exactly_the_documented_variables() {
    let example = env_example();
    let config = strings(
        &k8s_named("ConfigMap", "zaguan-config")["data"],
        "zaguan-config",
    );
    let secret_object = k8s_named("Secret", "zaguan");
    let secret = strings(
        &secret_object["stringData"],
        "secret.example.yaml stringData",
    );
    for name in config.keys() {
        assert_known_variable(name, "configmap.yaml");
    }
    for name in secret.keys() {
        assert_known_variable(name, "secret.example.yaml");
    }
    let secrets = secret_variables();
    let in_secret: BTreeSet<String> = secret.keys().cloned().collect();
    assert_eq!(
        in_secret, secrets,
        "secret.example.yaml must hold every secret of src/config/mod.rs and nothing else"
    );
    assert!(secret.values().all(|v| v == "change-me"));
    for name in config.keys() {
        assert!(
            !secrets.contains(name),
            "{name} is a secret: not in a ConfigMap"
        );
    }
    // Set per pod by the Deployment (the pod's own name, from the downward API).
    let container = zaguan_container(&k8s_named("Deployment", "zaguan"));
    let per_pod: Vec<String> = container["env"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter(|env| env["valueFrom"]["fieldRef"]["fieldPath"].is_string())
        .filter_map(|env| env["name"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(per_pod, ["ZAGUAN_INSTANCE_ID"]);
    let mut everything: BTreeSet<&String> = config.keys().collect();
    everything.extend(secret.keys());
    everything.extend(per_pod.iter());
    let documented: BTreeSet<&String> = example.keys().collect();
    assert_eq!(
        everything, documented,
        "configmap.yaml + secret.example.yaml should set every variable of .env.example"
    );

    // The ConfigMap carries .env.example's defaults, but for what the image's layout, the
    // cluster's log collector and the Ingress in front want.
    let overrides = BTreeMap::from([
        ("ZAGUAN_PROMPTS_DIR", "/app/prompts"),
        ("ZAGUAN_LOG_FORMAT", "json"),
        ("ZAGUAN_CLIENT_IP_HEADER", "X-Forwarded-For"),
        (
            "ZAGUAN_TRUSTED_PROXIES",
            "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16",
        ),
    ]);
    for (name, value) in &config {
        let expected = overrides
            .get(name.as_str())
            .copied()
            .unwrap_or(example[name].as_str());
        assert_eq!(value, expected, "configmap.yaml {name}");
    }
    zaguan::config::Config::from_vars(config.into_iter().collect())
        .expect("configmap.yaml is a valid configuration");
}

// ---- the prompts ConfigMap -----------------------------------------------------------------------

const PROMPTS_CONFIGMAP: &str = "deploy/k8s/configmap-prompts.yaml";

/// The prompt files the service loads: `prompts/*.md`, not README.md, not hidden, and the
/// business file.
fn prompt_files() -> BTreeMap<String, String> {
    std::fs::read_dir(root().join("prompts"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_owned();
            let wanted = (name.ends_with(".md")
                && !name.starts_with('.')
                && !name.eq_ignore_ascii_case("README.md"))
                || name == zaguan::business::BUSINESS_FILE
                || name == zaguan::templates::TEMPLATES_FILE;
            wanted.then(|| (name, std::fs::read_to_string(&path).unwrap()))
        })
        .collect()
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ConfigMap {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    data: BTreeMap<String, String>,
}

#[derive(serde::Serialize)]
struct Metadata {
    name: &'static str,
    labels: BTreeMap<&'static str, &'static str>,
}

fn prompts_configmap(files: BTreeMap<String, String>) -> String {
    let object = ConfigMap {
        api_version: "v1",
        kind: "ConfigMap",
        metadata: Metadata {
            name: "zaguan-prompts",
            labels: BTreeMap::from([(NAME_LABEL, "zaguan")]),
        },
        data: files,
    };
    format!(
        "# GENERATED from prompts/*.md (README.md excepted), prompts/business.toml and prompts/templates.toml by\n\
         #   UPDATE_DEPLOY=1 cargo test --test deploy\n\
         # Do not edit here: edit prompts/, regenerate, `kubectl apply -k deploy/k8s`; the pods\n\
         # pick the new set up without a restart (or edit the live ConfigMap to try a change).\n{}",
        serde_norway::to_string(&object).unwrap()
    )
}

#[test]
fn the_prompts_configmap_is_the_prompts_folder() {
    let files = prompt_files();
    assert!(!files.is_empty());
    if std::env::var_os("UPDATE_DEPLOY").is_some() {
        // Written aside and renamed: the other tests read the folder meanwhile.
        let path = root().join(PROMPTS_CONFIGMAP);
        let aside = path.with_extension("yaml.new");
        std::fs::write(&aside, prompts_configmap(files.clone())).unwrap();
        std::fs::rename(&aside, &path).unwrap();
        eprintln!("rewrote {PROMPTS_CONFIGMAP}");
    }
    let object = yaml(PROMPTS_CONFIGMAP);
    assert_eq!(object["kind"].as_str(), Some("ConfigMap"));
    assert_eq!(object["metadata"]["name"].as_str(), Some("zaguan-prompts"));
    let data = strings(&object["data"], PROMPTS_CONFIGMAP);
    let stale: Vec<&String> = files
        .keys()
        .chain(data.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|name| files.get(*name) != data.get(*name))
        .collect();
    assert!(
        stale.is_empty(),
        "{PROMPTS_CONFIGMAP} differs from prompts/ in {stale:?}; regenerate it with\n    \
         UPDATE_DEPLOY=1 cargo test --test deploy"
    );
    // A ConfigMap holds at most 1 MiB; keys are file names Kubernetes accepts.
    let size: usize = data.iter().map(|(k, v)| k.len() + v.len()).sum();
    assert!(
        size < 1024 * 1024,
        "the prompts are {size} bytes, over a ConfigMap's 1 MiB"
    );
    for name in data.keys() {
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c)),
            "{name} is not a valid ConfigMap key"
        );
    }
}

// ---- Dockerfile ------------------------------------------------------------------------------

const INSTRUCTIONS: &[&str] = &[
    "ADD",
    "ARG",
    "CMD",
    "COPY",
    "ENTRYPOINT",
    "ENV",
    "EXPOSE",
    "FROM",
    "HEALTHCHECK",
    "LABEL",
    "MAINTAINER",
    "ONBUILD",
    "RUN",
    "SHELL",
    "STOPSIGNAL",
    "USER",
    "VOLUME",
    "WORKDIR",
];

#[derive(Debug)]
struct Instruction {
    line: usize,
    keyword: String,
    args: String,
}

/// The parser directives (`# syntax=…` at the very top) and the instructions, with line
/// continuations joined and comment lines (also those inside a continuation) dropped.
fn parse_dockerfile(source: &str) -> (BTreeMap<String, String>, Vec<Instruction>) {
    let mut directives = BTreeMap::new();
    let mut escape = '\\';
    let mut lines = source.lines().enumerate().peekable();
    while let Some((_, line)) = lines.peek() {
        let Some((key, value)) = line
            .trim()
            .strip_prefix('#')
            .and_then(|rest| rest.split_once('='))
        else {
            break;
        };
        let key = key.trim().to_ascii_lowercase();
        if key.is_empty() || key.contains(char::is_whitespace) {
            break;
        }
        if key == "escape" {
            escape = value.trim().chars().next().expect("an escape character");
        }
        directives.insert(key, value.trim().to_owned());
        lines.next();
    }
    let mut instructions = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (index, line) in lines {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (part, continues) = match line.strip_suffix(escape) {
            Some(part) => (part.trim(), true),
            None => (line, false),
        };
        let (_, joined) = pending.get_or_insert_with(|| (index + 1, String::new()));
        if !joined.is_empty() && !part.is_empty() {
            joined.push(' ');
        }
        joined.push_str(part);
        if !continues {
            let (line, joined) = pending.take().unwrap();
            let (keyword, args) = joined
                .split_once(char::is_whitespace)
                .unwrap_or((&joined, ""));
            instructions.push(Instruction {
                line,
                keyword: keyword.to_ascii_uppercase(),
                args: args.trim().to_owned(),
            });
        }
    }
    assert!(
        pending.is_none(),
        "the Dockerfile ends inside a continuation"
    );
    (directives, instructions)
}

/// `["a", "b"]`: the exec form.
fn exec_form(args: &str, what: &str) -> Vec<String> {
    serde_json::from_str(args)
        .unwrap_or_else(|e| panic!("{what} `{args}` is not in exec (JSON) form: {e}"))
}

/// The words of an instruction's arguments that are not `--flags`.
fn operands(args: &str) -> (Vec<&str>, Vec<&str>) {
    args.split_whitespace().partition(|w| w.starts_with("--"))
}

/// `ENV a=1 b=2` (or the legacy `ENV a 1`).
fn env_pairs(args: &str) -> Vec<(String, String)> {
    let unquote = |v: &str| v.trim_matches('"').to_owned();
    match args.split_once(char::is_whitespace) {
        Some((key, value)) if !key.contains('=') => vec![(key.to_owned(), unquote(value.trim()))],
        _ => args
            .split_whitespace()
            .map(|pair| {
                let (key, value) = pair.split_once('=').expect("ENV key=value");
                (key.to_owned(), unquote(value))
            })
            .collect(),
    }
}

/// What `deploy/Dockerfile.dockerignore` lets into the build context, for a path of the
/// repository: an allow-list (`*` then `!path`) or a deny-list.
fn sent_to_the_builder(path: &str) -> bool {
    let patterns: Vec<String> = read("deploy/Dockerfile.dockerignore")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.trim_end_matches('/').to_owned())
        .collect();
    let top = path.trim_start_matches("./").split('/').next().unwrap();
    let mut sent = true;
    for pattern in &patterns {
        match pattern.strip_prefix('!') {
            Some(allowed) if allowed == top || allowed == path => sent = true,
            None if pattern == "*" || pattern == top || pattern == path => sent = false,
            _ => {}
        }
    }
    sent
}

#[test]
fn the_dockerfile_builds_a_non_root_image_that_serves_and_checks_itself() {
    let source = read("deploy/Dockerfile");
    let (directives, instructions) = parse_dockerfile(&source);
    assert!(
        directives
            .get("syntax")
            .is_some_and(|s| s.starts_with("docker/dockerfile:")),
        "cache mounts need the `# syntax=docker/dockerfile:1` directive: {directives:?}"
    );
    for instruction in &instructions {
        assert!(
            INSTRUCTIONS.contains(&instruction.keyword.as_str()),
            "deploy/Dockerfile:{}: unknown instruction {}",
            instruction.line,
            instruction.keyword
        );
    }

    // Stages: `FROM image AS name`, at least a builder and the runtime.
    let mut stages: Vec<(String, Vec<&Instruction>)> = Vec::new();
    for instruction in &instructions {
        if instruction.keyword == "FROM" {
            let (_, words) = operands(&instruction.args);
            assert!(
                words.len() == 3 && words[1].eq_ignore_ascii_case("as"),
                "deploy/Dockerfile:{}: FROM image AS name",
                instruction.line
            );
            stages.push((words[2].to_owned(), Vec::new()));
        } else {
            let (_, stage) = stages
                .last_mut()
                .unwrap_or_else(|| panic!("{instruction:?} before any FROM"));
            stage.push(instruction);
        }
    }
    assert!(stages.len() >= 2, "a multi-stage build");
    let built = stages[..stages.len() - 1].iter().any(|(_, stage)| {
        stage.iter().any(|i| {
            i.keyword == "RUN"
                && i.args.contains("cargo build")
                && i.args.contains("--release")
                && i.args.contains("--locked")
        })
    });
    assert!(built, "a build stage runs `cargo build --release --locked`");

    // Everything copied from the context exists and is sent to the builder; every stage
    // copied from is an earlier one.
    for (index, (_, stage)) in stages.iter().enumerate() {
        for copy in stage
            .iter()
            .filter(|i| i.keyword == "COPY" || i.keyword == "ADD")
        {
            let (flags, words) = operands(&copy.args);
            let from = flags.iter().find_map(|f| f.strip_prefix("--from="));
            if let Some(from) = from {
                assert!(
                    stages[..index].iter().any(|(name, _)| name == from),
                    "deploy/Dockerfile:{}: --from={from} is not an earlier stage",
                    copy.line
                );
                continue;
            }
            for source in &words[..words.len() - 1] {
                assert!(
                    root().join(source).exists(),
                    "deploy/Dockerfile:{}: COPY {source}: no such path in the repository",
                    copy.line
                );
                assert!(
                    sent_to_the_builder(source),
                    "deploy/Dockerfile:{}: {source} is left out by Dockerfile.dockerignore",
                    copy.line
                );
            }
        }
    }
    for secret in [".env", "target", ".git"] {
        assert!(
            !sent_to_the_builder(secret),
            "{secret} would be sent to the builder"
        );
    }

    // The runtime stage.
    let (_, runtime) = stages.last().unwrap();
    let last = |keyword: &str| {
        runtime
            .iter()
            .rev()
            .find(|i| i.keyword == keyword)
            .unwrap_or_else(|| panic!("the final stage has no {keyword}"))
    };
    let user = last("USER").args.split(':').next().unwrap().to_owned();
    assert!(
        user.parse::<u32>().is_ok_and(|uid| uid != 0),
        "USER `{user}`: a numeric non-root uid (runAsNonRoot can only check a number)"
    );
    let mut rest = last("HEALTHCHECK").args.as_str();
    while rest.starts_with("--") {
        rest = rest
            .split_once(char::is_whitespace)
            .map_or("", |(_, r)| r)
            .trim();
    }
    let check = rest.strip_prefix("CMD").expect("HEALTHCHECK … CMD");
    assert_eq!(
        exec_form(check.trim(), "HEALTHCHECK CMD")[..2],
        ["zaguan", "healthcheck"]
    );
    let mut command = exec_form(&last("ENTRYPOINT").args, "ENTRYPOINT");
    command.extend(exec_form(&last("CMD").args, "CMD"));
    assert_eq!(command, ["zaguan", "serve"], "ENTRYPOINT + CMD");
    let port = default_port().to_string();
    let exposed: Vec<&str> = runtime
        .iter()
        .filter(|i| i.keyword == "EXPOSE")
        .flat_map(|i| i.args.split_whitespace())
        .collect();
    assert!(
        exposed.iter().any(|p| p.trim_end_matches("/tcp") == port),
        "EXPOSE {port}: {exposed:?}"
    );
    let env: BTreeMap<String, String> = runtime
        .iter()
        .filter(|i| i.keyword == "ENV")
        .flat_map(|i| env_pairs(&i.args))
        .collect();
    for name in env.keys() {
        assert_known_variable(name, "deploy/Dockerfile");
    }
    let bind: std::net::SocketAddr = env["ZAGUAN_BIND_ADDR"].parse().unwrap();
    assert_eq!(bind.port(), default_port());
    assert_eq!(env["ZAGUAN_LOG_FORMAT"], "json");
    let prompts_dir = &env["ZAGUAN_PROMPTS_DIR"];
    assert_eq!(
        prompts_dir, "/app/prompts",
        "where deployment.yaml mounts them"
    );
    // `docker run --env-file .env` overrides ENV with .env.example's relative folder.
    assert_eq!(
        Path::new(&last("WORKDIR").args).join(&env_example()["ZAGUAN_PROMPTS_DIR"]),
        Path::new(prompts_dir),
        "WORKDIR + .env.example's ZAGUAN_PROMPTS_DIR should be the image's prompts"
    );
    let copies_prompts = runtime.iter().any(|i| {
        let (flags, words) = operands(&i.args);
        i.keyword == "COPY"
            && flags.iter().all(|f| !f.starts_with("--from"))
            && words
                .first()
                .is_some_and(|w| w.trim_end_matches('/') == "prompts")
            && words
                .last()
                .is_some_and(|w| w.trim_end_matches('/') == prompts_dir)
    });
    assert!(
        copies_prompts,
        "the image carries prompts/ at {prompts_dir}"
    );
}

#[test]
fn the_dockerfile_parser_joins_continuations_and_skips_comments() {
    let (directives, instructions) = parse_dockerfile(
        "# syntax=docker/dockerfile:1\n# escape=\\\n\n# a comment\nFROM a AS b\nRUN one \\\n  # inside\n  two\n",
    );
    assert_eq!(directives["syntax"], "docker/dockerfile:1");
    assert_eq!(instructions.len(), 2);
    assert_eq!(instructions[1].keyword, "RUN");
    assert_eq!(instructions[1].args, "one two");
    assert_eq!(instructions[1].line, 6);
    let (directives, _) = parse_dockerfile("FROM a AS b\n# syntax=x\n");
    assert!(
        directives.is_empty(),
        "a directive after an instruction is a comment"
    );
}

// ---- docker compose --------------------------------------------------------------------------

#[test]
fn compose_runs_zaguan_against_a_healthy_replica_set() {
    let compose = yaml("deploy/docker-compose.yml");
    let services = &compose["services"];
    let mongo = &services["mongo"];
    assert!(text(&mongo["image"], "mongo image").starts_with("mongo:"));
    let command: Vec<&str> = list(&mongo["command"], "mongo command")
        .iter()
        .map(|w| text(w, "mongo command"))
        .collect();
    let replica_set = command
        .iter()
        .position(|w| *w == "--replSet")
        .map(|i| command[i + 1])
        .expect("mongod --replSet");
    assert!(command.contains(&"--bind_ip_all"));
    let check: Vec<&str> = list(&mongo["healthcheck"]["test"], "mongo healthcheck")
        .iter()
        .map(|w| text(w, "healthcheck"))
        .collect();
    let script = check.join(" ");
    assert!(script.contains("mongosh"), "{script}");
    assert!(
        script.contains("rs.status()") && script.contains("rs.initiate("),
        "the healthcheck initiates the replica set: {script}"
    );
    assert!(script.contains(&format!("_id:'{replica_set}'")), "{script}");
    assert!(script.contains("host:'mongo:27017'"), "{script}");
    let mongo_volume = text(&list(&mongo["volumes"], "mongo volumes")[0], "volume");
    let (volume, target) = mongo_volume.split_once(':').unwrap();
    assert_eq!(target, "/data/db");
    assert!(
        compose["volumes"]
            .as_mapping()
            .unwrap()
            .contains_key(volume),
        "{volume} is a named volume"
    );

    let zaguan = &services["zaguan"];
    let deploy = root().join("deploy");
    let context = deploy.join(text(&zaguan["build"]["context"], "build context"));
    assert_eq!(
        context.canonicalize().unwrap(),
        root().canonicalize().unwrap()
    );
    assert!(
        context
            .join(text(&zaguan["build"]["dockerfile"], "dockerfile"))
            .is_file()
    );
    // `../.env` is the operator's copy of `.env.example` (never in the repository).
    let env_file = text(&zaguan["env_file"], "env_file");
    assert!(
        deploy.join(format!("{env_file}.example")).is_file(),
        "{env_file}.example: the file to copy to {env_file}"
    );
    assert!(read("deploy/README.md").contains("cp .env.example .env"));
    let environment = strings(&zaguan["environment"], "zaguan environment");
    for name in environment.keys() {
        assert_known_variable(name, "docker-compose.yml");
    }
    let uri = &environment["MONGODB_URI"];
    assert!(
        uri.starts_with("mongodb://mongo:27017/")
            && uri.contains(&format!("replicaSet={replica_set}")),
        "MONGODB_URI `{uri}` should reach the mongo service's replica set"
    );
    assert_eq!(
        zaguan["depends_on"]["mongo"]["condition"].as_str(),
        Some("service_healthy")
    );
    let port = default_port();
    let ports: Vec<&str> = list(&zaguan["ports"], "ports")
        .iter()
        .map(|p| text(p, "port"))
        .collect();
    assert!(
        ports.iter().any(|p| p.ends_with(&format!(":{port}"))),
        "{ports:?} publishes the container's {port}"
    );
    if let Some(bind) = environment.get("ZAGUAN_BIND_ADDR") {
        assert_eq!(bind.parse::<std::net::SocketAddr>().unwrap().port(), port);
    }
    assert_eq!(zaguan["restart"].as_str(), Some("unless-stopped"));
    let grace = duration(
        text(&zaguan["stop_grace_period"], "stop_grace_period"),
        "stop_grace_period",
    );
    assert!(
        grace > drain_timeout(),
        "stop_grace_period {grace:?} must exceed the drain timeout {:?}",
        drain_timeout()
    );
    assert!(
        read("deploy/docker-compose.yml").contains("../prompts:/app/prompts:ro"),
        "the example prompts mount"
    );

    docker_compose_config();
}

/// `docker compose config -q` where Docker and its compose plugin are installed, on a copy
/// beside a `.env` made from `.env.example` (the real `../.env` is the operator's). Needs no
/// Docker engine.
fn docker_compose_config() {
    let compose = Command::new("docker")
        .args(["compose", "version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !compose {
        eprintln!("no `docker compose` on this machine: `docker compose config -q` not run");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("deploy")).unwrap();
    std::fs::copy(
        root().join("deploy/docker-compose.yml"),
        dir.path().join("deploy/docker-compose.yml"),
    )
    .unwrap();
    std::fs::copy(root().join(".env.example"), dir.path().join(".env")).unwrap();
    let output = Command::new("docker")
        .args(["compose", "-f", "deploy/docker-compose.yml", "config", "-q"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "docker compose config: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

// ---- systemd ---------------------------------------------------------------------------------

/// A unit file: section → its `key=value` entries in order (keys may repeat).
fn parse_unit(source: &str) -> BTreeMap<String, Vec<(String, String)>> {
    let mut sections: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut section = String::new();
    let mut joined = String::new();
    for line in source.lines() {
        let line = line.trim();
        if joined.is_empty() && (line.is_empty() || line.starts_with(['#', ';'])) {
            continue;
        }
        if let Some(part) = line.strip_suffix('\\') {
            joined.push_str(part);
            joined.push(' ');
            continue;
        }
        joined.push_str(line);
        let entry = std::mem::take(&mut joined);
        if let Some(name) = entry.strip_prefix('[').and_then(|e| e.strip_suffix(']')) {
            section = name.to_owned();
            continue;
        }
        let (key, value) = entry
            .split_once('=')
            .unwrap_or_else(|| panic!("zaguan.service: `{entry}` is not key=value"));
        assert!(
            !section.is_empty(),
            "zaguan.service: {key} outside a section"
        );
        sections
            .entry(section.clone())
            .or_default()
            .push((key.trim().to_owned(), value.trim().to_owned()));
    }
    sections
}

#[test]
fn the_systemd_unit_serves_reloads_on_hup_drains_and_is_hardened() {
    let unit = parse_unit(&read("deploy/systemd/zaguan.service"));
    let service = &unit["Service"];
    let values = |key: &str| -> Vec<&str> {
        service
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    let one = |key: &str| -> &str {
        let found = values(key);
        assert_eq!(found.len(), 1, "[Service] {key}: {found:?}");
        found[0]
    };

    let start: Vec<&str> = one("ExecStart").split_whitespace().collect();
    assert!(
        start[0].starts_with('/') && start[0].ends_with("/zaguan"),
        "{start:?}"
    );
    assert_eq!(start[1..], ["serve"]);
    let reload = one("ExecReload");
    assert!(
        reload.contains("-HUP") && reload.contains("$MAINPID"),
        "ExecReload should send SIGHUP: {reload}"
    );
    assert!(
        read("src/runtime/reload.rs").contains("SignalKind::hangup()"),
        "the service no longer reloads on SIGHUP"
    );
    assert!(values("KillSignal").iter().all(|s| *s == "SIGTERM"));
    let stop = duration(one("TimeoutStopSec"), "TimeoutStopSec");
    assert!(
        stop > drain_timeout(),
        "TimeoutStopSec {stop:?} must exceed the drain timeout {:?}",
        drain_timeout()
    );

    // The env file (a copy of .env.example) overrides Environment=: its relative prompts
    // folder must resolve, from the working directory, to the one the unit names.
    assert_eq!(values("EnvironmentFile").len(), 1);
    let prompts = values("Environment")
        .into_iter()
        .find_map(|v| v.strip_prefix("ZAGUAN_PROMPTS_DIR="))
        .expect("Environment=ZAGUAN_PROMPTS_DIR=…");
    assert_eq!(
        Path::new(one("WorkingDirectory")).join(&env_example()["ZAGUAN_PROMPTS_DIR"]),
        Path::new(prompts),
        "with .env.example's ZAGUAN_PROMPTS_DIR the service would not find its prompts"
    );
    for assignment in values("Environment") {
        let (name, _) = assignment.split_once('=').expect("Environment=NAME=value");
        assert_known_variable(name, "zaguan.service");
    }

    for (key, expected) in [
        ("DynamicUser", "yes"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("PrivateDevices", "yes"),
        ("ProtectKernelTunables", "yes"),
        ("ProtectKernelModules", "yes"),
        ("ProtectControlGroups", "yes"),
        ("RestrictSUIDSGID", "yes"),
        ("RestrictNamespaces", "yes"),
        ("LockPersonality", "yes"),
        ("CapabilityBoundingSet", ""),
    ] {
        assert_eq!(one(key), expected, "[Service] {key}");
    }
    let families = one("RestrictAddressFamilies");
    for family in ["AF_INET", "AF_INET6"] {
        assert!(
            families.contains(family),
            "RestrictAddressFamilies: {families}"
        );
    }
    assert!(
        unit["Install"]
            .iter()
            .any(|(k, v)| k == "WantedBy" && v == "multi-user.target")
    );
}

#[test]
fn the_deploy_readme_covers_each_way_to_run() {
    let readme = read("deploy/README.md");
    for said in [
        "docker build -f deploy/Dockerfile",
        "cp .env.example .env",
        "docker compose -f deploy/docker-compose.yml up",
        "/webhook",
        "kubectl apply -k deploy/k8s",
        "UPDATE_DEPLOY=1 cargo test --test deploy",
        "systemctl reload zaguan",
    ] {
        assert!(
            readme.contains(said),
            "deploy/README.md does not say `{said}`"
        );
    }
}

// ---- zaguan healthcheck ------------------------------------------------------------------------

/// `zaguan healthcheck ARGS` with `ZAGUAN_BIND_ADDR=bind` and `extra` variables: exit code and
/// stderr.
fn healthcheck(bind: &str, args: &[&str], extra: &[(&str, &str)]) -> (Option<i32>, String) {
    let started = Instant::now();
    let output = zaguan()
        .arg("healthcheck")
        .args(args)
        .env("ZAGUAN_BIND_ADDR", bind)
        .envs(extra.iter().copied())
        .output()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "healthcheck took {:?}",
        started.elapsed()
    );
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn healthcheck_passes_against_a_serving_instance_and_fails_with_a_reason_otherwise() {
    let port = free_port();
    let mut server = zaguan()
        .arg("serve")
        .env("ZAGUAN_BIND_ADDR", format!("127.0.0.1:{port}"))
        .env("RUST_LOG", "warn")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let bind = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if healthcheck(&bind, &[], &[]).0 == Some(0) {
            break;
        }
        assert!(
            server.try_wait().unwrap().is_none(),
            "zaguan serve exited early"
        );
        assert!(
            Instant::now() < deadline,
            "zaguan serve did not answer /healthz"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Every address (as the image binds) is asked on loopback; unrelated bad variables do not
    // matter to the probe.
    let everywhere = format!("0.0.0.0:{port}");
    let (code, stderr) = healthcheck(&everywhere, &[], &[("LLM_PRIMARY", "gpt-4")]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    let readyz = format!("http://127.0.0.1:{port}/readyz");
    assert_eq!(healthcheck("bad", &["--url", &readyz], &[]).0, Some(0));
    let missing = format!("http://127.0.0.1:{port}/nope");
    let (code, stderr) = healthcheck(&bind, &["--url", &missing], &[]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("answered 404"), "{stderr}");

    server.kill().unwrap();
    server.wait().unwrap();

    let silent = free_port();
    let (code, stderr) = healthcheck(&format!("0.0.0.0:{silent}"), &[], &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.starts_with("zaguan healthcheck: GET http://127.0.0.1:")
            && stderr.contains(&format!(":{silent}/healthz"))
            && stderr.to_lowercase().contains("refused"),
        "{stderr}"
    );
    // Something listens but never answers: given up after the 2 s timeout.
    let mute = TcpListener::bind("127.0.0.1:0").unwrap();
    let mute_port = mute.local_addr().unwrap().port();
    let (code, stderr) = healthcheck(&format!("127.0.0.1:{mute_port}"), &[], &[]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("no answer within 2s"), "{stderr}");
    drop(mute);

    let (code, stderr) = healthcheck("localhost", &[], &[]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("ZAGUAN_BIND_ADDR"), "{stderr}");
}
