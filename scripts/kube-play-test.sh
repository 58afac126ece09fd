#!/usr/bin/env bash
# Runs deploy/kubernetes/ for real with `podman kube play`: builds the runtime image from
# the Containerfile (FROM localhost/airlock-base:bookworm, made by container-image.sh),
# plays the Secret and the Deployment (kinds podman does not know are skipped), waits for
# /readyz and calls run_code through the pod's port, on 127.0.0.1 only.
# Usage: scripts/kube-play-test.sh [path/to/airlock] [deployment manifest]
#   (default bin/airlock, deploy/kubernetes/deployment.yaml). With deployment-landlock.yaml
#   the pod also gets the Docker-like seccomp profile of container-tests.py, which refuses
#   user namespaces as a restricted cluster's RuntimeDefault does, and must serve, degraded,
#   in the Landlock tier.
# Needs: root, podman, mmdebstrap (for the base image), curl, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/airlock}
manifest=${2:-deploy/kubernetes/deployment.yaml}
port=${KUBE_PLAY_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
image=localhost/airlock:latest
work=$(mktemp -d)
played=
cleanup() {
  if [ -n "$played" ]; then podman kube down "$work/play.yaml" >/dev/null 2>&1 || true; fi
  podman secret rm airlock-tokens >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# This host's two podman quirks (see /work/shared/notes/platform.md): crun rejects the
# hybrid cgroup layout, and root here cannot raise RLIMIT_NOFILE/NPROC, so the limits
# are given explicitly. kube play takes no --ulimit, hence a containers.conf.
cat >"$work/containers.conf" <<'CONF'
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF="$work/containers.conf"

scripts/container-image.sh
ctx="$work/ctx"
mkdir -p "$ctx/bin"
cp "$bin" "$ctx/bin/airlock"
podman build --quiet -f Containerfile --build-arg BASE=localhost/airlock-base:bookworm -t "$image" "$ctx" >/dev/null

token=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
# The Secret with a real token instead of the placeholders, and the Deployment with a
# host port on loopback (a kube play pod is reached through hostPort).
version=$(podman version --format '{{.Client.Version}}')
if [ "$(printf '%s\n4.7\n' "$version" | sort -V | head -n1)" != 4.7 ] && ! grep -q 'AIRLOCK_ISOLATION, value: landlock' "$manifest"; then
  echo "kube-play: podman $version has no procMount (4.7+): the pod runs privileged: true instead (still uid 10001)" >&2
fi
python3 - "$token" "$port" "$work/play.yaml" "$version" "$manifest" "$work" <<'PY'
import importlib.util, json, os, sys
token, port, out, version, manifest, work = sys.argv[1:7]
podman_old = tuple(int(x) for x in version.split(".")[:2]) < (4, 7)
secret = open("deploy/kubernetes/secret.yaml").read()
head, _, _ = secret.partition("stringData:")
# podman 4.3 reads a Secret's data, not its stringData, and writes the values into the
# volume without base64-decoding them; so for podman the value goes in as plain text.
secret = head + "data:\n  tokens: " + json.dumps("kube-play-test " + token + "\n") + "\n"
dep = open(manifest).read()
landlock = "{name: AIRLOCK_ISOLATION, value: landlock}" in dep
marker = "            - {name: mcp, containerPort: 8765, protocol: TCP}"
assert marker in dep, "deployment.yaml: the mcp port line moved"
dep = dep.replace(marker, "            - {name: mcp, containerPort: 8765, protocol: TCP, hostPort: %s, hostIP: 127.0.0.1}" % port)
dep = dep.replace("replicas: 3", "replicas: 1")
# hostUsers: false makes podman use userns=auto, which needs /etc/subuid ranges for the
# "containers" user; this host has none, so the pod shares the host's user namespace
# (still uid 10001, with no capabilities).
assert landlock or "      hostUsers: false\n" in dep
dep = dep.replace("      hostUsers: false\n", "")
# podman implements procMount only from 4.7 (containers/podman#19885) and reads neither
# seccompProfile nor appArmorProfile from a securityContext; privileged is the one switch
# 4.3 has that unmasks /proc and lifts its seccomp profile. The server still runs as uid
# 10001 with no effective capabilities. Kubernetes itself takes the manifest as written.
if landlock:
    # podman 4.3 reads no seccompProfile from a securityContext, but takes the alpha
    # annotation: the pod gets the profile that refuses user namespaces.
    spec = importlib.util.spec_from_file_location("ct", "scripts/container-tests.py")
    ct = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ct)
    prof = os.path.join(work, "docker-like.json")
    ct.docker_like_profile(prof)
    marker = "    metadata:\n      labels: {app.kubernetes.io/name: airlock}\n"
    assert marker in dep
    dep = dep.replace(marker, marker + "      annotations:\n        seccomp.security.alpha.kubernetes.io/pod: localhost/docker-like.json\n")
elif podman_old:
    for line in ("            allowPrivilegeEscalation: false\n", "            procMount: Unmasked\n"):
        assert line in dep, line
        dep = dep.replace(line, "")
    dep = dep.replace("            capabilities: {drop: [ALL]}\n", "            capabilities: {drop: [ALL]}\n            privileged: true\n")
with open(out + ".secret", "w") as f:
    f.write(secret)
with open(out, "w") as f:
    f.write(dep)
PY
# podman 4.3 takes a Secret volume from a podman secret whose data is the Secret's YAML
# (a Secret document in the played file is not enough: the volume lookup fails).
podman secret rm airlock-tokens >/dev/null 2>&1 || true
podman secret create airlock-tokens "$work/play.yaml.secret" >/dev/null
# Seen once on this host: podman 4.3.1's kube play hung for an hour in a futex (a lock it
# held itself), and the killed play left a container whose name the next play could not
# take. So a play gets 5 minutes; one that hangs is killed, taken down and tried once more,
# and says so. Any other failure fails at once.
played=1
# A play killed mid-way can leave the container's name in podman's storage but not its
# database, where --replace does not see it ("name already in use"): removed first.
podman rm --storage airlock-pod-0-airlock >/dev/null 2>&1 || true
play() { timeout -s KILL 300 podman kube play --replace --seccomp-profile-root "$work" "$work/play.yaml" >"$work/play.log" 2>&1; }
if play; then :; else
  rc=$?
  if [ "$rc" != 137 ]; then cat "$work/play.log" >&2; exit 1; fi
  echo "kube-play: podman kube play hung for 5 minutes; taking it down and playing once more" >&2
  podman kube down "$work/play.yaml" >/dev/null 2>&1 || true
  podman pod rm -f airlock-pod-0 >/dev/null 2>&1 || true
  podman rm -f airlock-pod-0-airlock >/dev/null 2>&1 || true
  podman rm --storage airlock-pod-0-airlock >/dev/null 2>&1 || true
  play || { cat "$work/play.log" >&2; exit 1; }
fi

ready=
for _ in $(seq 1 120); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz" || true)
  if [ "$code" = 200 ]; then ready=1; break; fi
  sleep 0.5
done
pod=$(podman pod ps --format '{{.Name}}' --filter name=airlock | head -n1)
if [ -z "$ready" ]; then
  echo "kube-play: the pod never became ready (last /readyz: $code); its log:" >&2
  podman pod logs "$pod" 2>&1 | tail -n 30 >&2 || true
  exit 1
fi
echo "kube-play: pod $pod ready"
curl -s -o /dev/null -w 'kube-play: /healthz %{http_code}\n' "http://127.0.0.1:$port/healthz"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/mcp" -H 'Content-Type: application/json' \
  -d '{"jsonrpc":"2.0","id":1,"method":"tools/list"}')" = 401 ] || { echo "kube-play: a call without a token was not refused" >&2; exit 1; }
out=$(curl -s --max-time 30 "http://127.0.0.1:$port/mcp" -H "Authorization: Bearer $token" \
  -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
  -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"import os; print(6*7, os.getuid())"}}}')
printf '%s' "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)["result"]
s = r["structuredContent"]
print("kube-play: run_code status", s["status"], "stdout", repr(s["stdout"]), "degraded", s.get("degraded", False), "isolation", s.get("isolation"))
assert not r.get("isError"), r
assert s["stdout"].split()[0] == "42", s["stdout"]
if sys.argv[1] == "landlock":
    assert s.get("isolation") == "landlock" and s.get("degraded"), s
' "$(grep -q '{name: AIRLOCK_ISOLATION, value: landlock}' "$manifest" && echo landlock || echo namespaces)"
curl -s "http://127.0.0.1:$port/metrics" -H "Authorization: Bearer $token" | grep -E '^airlock_runs_total' | sed 's/^/kube-play: /'
echo "kube-play: passed"
