#!/usr/bin/env bash
# A stateful failover on one machine, with nothing but flotilla and kubectl.
#
# It starts a control plane (flotilla apiserver on memory storage), two simulated member clusters whose Flink
# simulator checkpoints every second into a shared directory and whose savepoint rule restores a job from the
# checkpoints of the job id in its label, joins them, applies the manifests of this directory (namespace,
# ClusterTaintPolicy, FlinkDeployment and its PropagationPolicy) and starts the controller-manager with short
# timings. When the Flink job runs, it puts a NoExecute taint on the member running it and shows the job moving
# to the other member: the old copy is deleted first (purgeMode Directly), the new one is created with the old
# job id as a label, and the member turns that label into spec.job.initialSavepointPath, so the job resumes from
# its last checkpoint. Every process it started is stopped on exit.
#
# Usage: examples/failover/walkthrough.sh          (from anywhere; uses the repository's .venv when present)
# Environment: FLOTILLA, KUBECTL, PYTHON override the programs; WALKTHROUGH_DIR sets the working directory
# (default: a new temporary directory, removed at the end unless KEEP=1 or the walkthrough failed).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
VENV_BIN="$REPO/.venv/bin"
pick() { if [[ -x "$VENV_BIN/$1" ]]; then echo "$VENV_BIN/$1"; else command -v "$1" || echo "$1"; fi; }
FLOTILLA="${FLOTILLA:-$(pick flotilla)}"
KUBECTL="${KUBECTL:-$(pick kubectl)}"
PYTHON="${PYTHON:-$(pick python)}"

NS=streaming
NAME=wordcount
MEMBERS=(member1 member2)
JOB_LABEL=failover.flink.io/job-id
TAINT_KEY=example.io/maintenance
WAIT=30   # seconds any single step may take

WORK="${WALKTHROUGH_DIR:-$(mktemp -d -t flotilla-failover.XXXXXX)}"
mkdir -p "$WORK/logs"
CP_DIR="$WORK/cp"
MEMBERS_DIR="$WORK/members"
export KUBECONFIG="$CP_DIR/kubeconfig"

PIDS=()     # processes started here, in start order
TASK_WATCH=""  # the kubectl watch that records the binding's eviction tasks during the failover
NAMES=()
OK=0

step() { printf '\n==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }

log_tails() {
  local f
  for f in "$WORK"/logs/*.log; do
    [[ -f "$f" ]] || continue
    printf -- '--- %s (last 15 lines)\n' "$(basename "$f")" >&2
    tail -n 15 "$f" >&2 || true
  done
}

fail() {
  printf '\nFAILED: %s\n' "$*" >&2
  log_tails
  exit 1
}

cleanup() {
  local i pid
  if [[ -n "$TASK_WATCH" ]]; then kill "$TASK_WATCH" 2>/dev/null || true; fi
  step "Cleaning up: stopping the processes this walkthrough started"
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    pid="${PIDS[$i]}"
    if kill -0 "$pid" 2>/dev/null; then
      info "stopping ${NAMES[$i]} (pid $pid)"
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    pid="${PIDS[$i]}"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    wait "$pid" 2>/dev/null || true
  done
  if [[ "$OK" == 1 && "${KEEP:-0}" != 1 && -z "${WALKTHROUGH_DIR:-}" ]]; then
    rm -rf "$WORK"
  else
    info "logs and data kept in $WORK"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'fail "line $LINENO: \"$BASH_COMMAND\" exited with status $?"' ERR

start() {  # start NAME COMMAND... : run in the background, output to logs/NAME.log
  local name="$1"; shift
  "$@" >"$WORK/logs/$name.log" 2>&1 &
  PIDS+=("$!")
  NAMES+=("$name")
  info "started $name (pid $!): $*"
}

check_alive() {
  local i
  for i in "${!PIDS[@]}"; do
    kill -0 "${PIDS[$i]}" 2>/dev/null || fail "${NAMES[$i]} exited (log: $WORK/logs/${NAMES[$i]}.log)"
  done
}

wait_for() {  # wait_for TIMEOUT WHAT COMMAND... : retry COMMAND until it succeeds
  local timeout="$1" what="$2"; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    check_alive
    ((SECONDS < deadline)) || fail "timed out after ${timeout}s waiting for $what"
    sleep 0.2
  done
}

cp_kubectl() { "$KUBECTL" --kubeconfig "$CP_DIR/kubeconfig" "$@"; }
member_kubectl() { local m="$1"; shift; "$KUBECTL" --kubeconfig "$MEMBERS_DIR/$m/kubeconfig" "$@"; }
flink_field() {  # flink_field MEMBER JSONPATH : a field of the member's FlinkDeployment (fails when absent)
  member_kubectl "$1" get flinkdeployment "$NAME" -n "$NS" -o "jsonpath=$2"
}
job_state() { flink_field "$1" '{.status.jobStatus.state}' 2>/dev/null; }
running_in() { [[ "$(job_state "$1")" == RUNNING ]]; }
absent_in() { ! member_kubectl "$1" get flinkdeployment "$NAME" -n "$NS" >/dev/null 2>&1; }
annotation() {  # annotation MEMBER KEY
  flink_field "$1" "{.metadata.annotations.${2//./\\.}}"
}
label() {  # label MEMBER KEY
  flink_field "$1" "{.metadata.labels.${2//./\\.}}" 2>/dev/null
}

[[ -x "$FLOTILLA" ]] || command -v "$FLOTILLA" >/dev/null || fail "flotilla not found (run 'make test' or set FLOTILLA)"
[[ -x "$KUBECTL" ]] || command -v "$KUBECTL" >/dev/null || fail "kubectl not found (run 'make test' or set KUBECTL)"
info "working directory: $WORK"

# ------------------------------------------------------------------------------------------------- set-up

step "Starting the control plane: flotilla apiserver (memory storage, a free port)"
start apiserver "$FLOTILLA" apiserver --storage memory:// --data-dir "$CP_DIR" --port 0
wait_for "$WAIT" "the API server's kubeconfig" test -s "$CP_DIR/kubeconfig"
wait_for "$WAIT" "the API server to answer /readyz" cp_kubectl get --raw /readyz
info "serving $(cp_kubectl config view -o 'jsonpath={.clusters[0].cluster.server}')"

step "Starting two simulated member clusters (savepoint rule on, a Flink checkpoint every second)"
start members "$FLOTILLA" member --count 2 --data-dir "$MEMBERS_DIR" --ready-delay 0.2 \
  --sim-option savepoint_rule=true --sim-option flink_checkpoint_interval=1 \
  --sim-option flink_progress_interval=0.5
for m in "${MEMBERS[@]}"; do
  wait_for "$WAIT" "$m to start" test -s "$MEMBERS_DIR/$m/admin.json"
  wait_for "$WAIT" "$m to answer /readyz" member_kubectl "$m" get --raw /readyz
done

step "Installing the FlinkDeployment CRD on the control plane (the same CRD the members serve)"
"$PYTHON" -c 'import json; from flotilla.member.flink_crd import flink_deployment_crd; print(json.dumps(flink_deployment_crd()))' \
  | cp_kubectl apply -f -
cp_kubectl wait --for=condition=Established crd/flinkdeployments.flink.apache.org --timeout="${WAIT}s"

step "Joining the members: flotilla join"
for m in "${MEMBERS[@]}"; do
  "$FLOTILLA" join "$m" --cluster-kubeconfig "$MEMBERS_DIR/$m/kubeconfig" --kubeconfig "$CP_DIR/kubeconfig"
done

step "Applying the ClusterTaintPolicy (Ready False/Unknown -> cluster.karmada.io/not-ready:NoExecute)"
cp_kubectl apply -f "$HERE/10-cluster-taint-policy.yaml"

step "Starting flotilla controller-manager with short timings"
start controller-manager "$FLOTILLA" controller-manager --kubeconfig "$CP_DIR/kubeconfig" \
  --cluster-status-update-frequency 0.5s --cluster-success-threshold 1s --cluster-failure-threshold 1s \
  --graceful-eviction-timeout 30s
for m in "${MEMBERS[@]}"; do
  wait_for "$WAIT" "cluster $m to be Ready" \
    cp_kubectl wait --for=condition=Ready "cluster/$m" --timeout=1s
done
apis_known() { [[ -n "$(cp_kubectl get cluster "$1" -o 'jsonpath={.status.apiEnablements}')" ]]; }
for m in "${MEMBERS[@]}"; do
  wait_for "$WAIT" "the APIs $m serves to be known" apis_known "$m"
done
cp_kubectl get clusters

step "Applying the namespace, the FlinkDeployment and its PropagationPolicy (Directly + statePreservation)"
cp_kubectl apply -f "$HERE/00-namespace.yaml" -f "$HERE/20-flinkdeployment.yaml" \
  -f "$HERE/21-flinkdeployment-policy.yaml"

# ------------------------------------------------------------------------------------------------- the job runs

step "Waiting for the Flink job to run in one member"
OLD=""
deadline=$((SECONDS + WAIT))
while [[ -z "$OLD" ]]; do
  for m in "${MEMBERS[@]}"; do
    if running_in "$m"; then OLD="$m"; fi
  done
  [[ -n "$OLD" ]] && break
  check_alive
  ((SECONDS < deadline)) || fail "timed out waiting for $NAME to run"
  sleep 0.2
done
NEW="member1"; [[ "$OLD" == member1 ]] && NEW="member2"
OLD_JOB_ID="$(flink_field "$OLD" '{.status.jobStatus.jobId}')"
info "$NAME runs in $OLD with job id $OLD_JOB_ID"
for m in "${MEMBERS[@]}"; do
  [[ "$m" == "$OLD" ]] || absent_in "$m" || fail "$NAME is in $m as well as $OLD"
done

has_checkpoint() { local c; c="$(annotation "$OLD" sim.flotilla.io/last-checkpoint)" && [[ -n "$c" && "$c" != none ]]; }
wait_for "$WAIT" "a completed checkpoint of the job in $OLD" has_checkpoint
info "last checkpoint in $OLD: $(annotation "$OLD" sim.flotilla.io/last-checkpoint)"

binding_has_job_id() {
  [[ "$(cp_kubectl get rb "$NAME-flinkdeployment" -n "$NS" \
    -o "jsonpath={.status.aggregatedStatus[?(@.clusterName==\"$OLD\")].status.jobStatus.jobId}")" == "$OLD_JOB_ID" ]]
}
wait_for "$WAIT" "the job id in the binding's aggregated status (what the rule reads)" binding_has_job_id
info "the control plane has the job's reflected status; the rule { .jobStatus.jobId } gives $OLD_JOB_ID:"
cp_kubectl get rb "$NAME-flinkdeployment" -n "$NS" \
  -o "jsonpath={.status.aggregatedStatus[?(@.clusterName==\"$OLD\")].status}" \
  | "$FLOTILLA" jsonpath '{ .jobStatus.jobId }' -f - | sed 's/^/    /'
echo
cp_kubectl get rb -n "$NS"

# ------------------------------------------------------------------------------------------------- failover

# a watch sees every version of the binding, so the eviction task is shown however briefly it exists
TASKS="$WORK/eviction-tasks.txt"
# (one line per version: the tasks as JSON, empty when there are none; a {range} would end the watch at the first
# version without tasks)
cp_kubectl get rb "$NAME-flinkdeployment" -n "$NS" --watch -o 'jsonpath={.spec.gracefulEvictionTasks}{"\n"}' \
  >"$TASKS" 2>/dev/null &
TASK_WATCH=$!
sleep 0.5  # the watch is open before the taint

step "Tainting $OLD with $TAINT_KEY:NoExecute (as a ClusterTaintPolicy does when Ready turns False)"
cp_kubectl patch cluster "$OLD" --type merge \
  -p "{\"spec\":{\"taints\":[{\"key\":\"$TAINT_KEY\",\"effect\":\"NoExecute\"}]}}"

show_task() {  # the first eviction task the watch saw, once
  local task
  if [[ "$TASK_SHOWN" == 0 ]]; then
    task="$(grep -m1 . "$TASKS" 2>/dev/null || true)"
    if [[ -n "$task" ]]; then
      task="$(printf '{"items": %s}' "$task" | "$FLOTILLA" jsonpath \
        '{range .items[*]}fromCluster={.fromCluster} purgeMode={.purgeMode} preservedLabelState={.preservedLabelState}{end}' -f -)"
      info "eviction task on the binding: $task"
      TASK_SHOWN=1
    fi
  fi
}

step "Watching the job move from $OLD to $NEW"
SEEN_LABEL=""
TASK_SHOWN=0
moved=0
deadline=$((SECONDS + WAIT))
while ((SECONDS < deadline)); do
  check_alive
  show_task
  value="$(label "$NEW" "$JOB_LABEL" || true)"
  if [[ -n "$value" && -z "$SEEN_LABEL" ]]; then
    SEEN_LABEL="$value"
    info "the new copy in $NEW was created with the label $JOB_LABEL=$value"
  fi
  if absent_in "$OLD" && running_in "$NEW" \
      && [[ -n "$(annotation "$NEW" sim.flotilla.io/records-processed 2>/dev/null || true)" ]]; then
    moved=1
    break
  fi
  sleep 0.1
done
((moved)) || fail "$NAME did not end up RUNNING in $NEW only within ${WAIT}s"
show_task

NEW_JOB_ID="$(flink_field "$NEW" '{.status.jobStatus.jobId}')"
RULE_PATH="$(annotation "$NEW" savepoint-rule.flotilla.io/restored-from || true)"
RESTORED_FROM="$(annotation "$NEW" sim.flotilla.io/restored-from || true)"
RESTORED_OFFSET="$(annotation "$NEW" sim.flotilla.io/restored-offset || true)"
RECORDS="$(annotation "$NEW" sim.flotilla.io/records-processed || true)"
info "$NAME now runs only in $NEW (job id $NEW_JOB_ID); the copy in $OLD is gone"
info "the member's savepoint rule set spec.job.initialSavepointPath=$RULE_PATH"
info "the job restored from $RESTORED_FROM at record $RESTORED_OFFSET and has processed $RECORDS records"

[[ -n "$RULE_PATH" && "$RULE_PATH" == *"$OLD_JOB_ID"* ]] \
  || fail "the new copy did not restore from a checkpoint of job $OLD_JOB_ID (path: '$RULE_PATH')"
[[ "$RESTORED_FROM" == "$RULE_PATH" ]] || fail "the job restored from '$RESTORED_FROM', not '$RULE_PATH'"
[[ -z "$SEEN_LABEL" || "$SEEN_LABEL" == "$OLD_JOB_ID" ]] \
  || fail "the label $JOB_LABEL on the new copy was '$SEEN_LABEL', not $OLD_JOB_ID"
((RESTORED_OFFSET > 0)) || fail "the job restarted from record 0"
echo "job id $OLD_JOB_ID carried over from $OLD to $NEW: restored from checkpoint $RULE_PATH"

INJECTED="$(cp_kubectl get rb "$NAME-flinkdeployment" -n "$NS" \
  -o 'jsonpath={.metadata.annotations.failover\.flotilla\.io/injected-state}' 2>/dev/null || true)"
[[ -z "$INJECTED" ]] || info "recorded on the binding (failover.flotilla.io/injected-state): $INJECTED"
member_kubectl "$NEW" get flinkdeployments -n "$NS"

# ------------------------------------------------------------------------------------------------- recovery

step "Removing the taint from $OLD: it takes workloads again (this job stays in $NEW)"
cp_kubectl patch cluster "$OLD" --type merge -p '{"spec":{"taints":null}}'
tasks_done() {
  local t
  t="$(cp_kubectl get rb "$NAME-flinkdeployment" -n "$NS" -o 'jsonpath={.spec.gracefulEvictionTasks}')" || return 1
  [[ -z "$t" || "$t" == "[]" ]]
}
wait_for "$WAIT" "the eviction task to be removed once the new copy is healthy" tasks_done
value="$(label "$NEW" "$JOB_LABEL" || true)"
if [[ -n "$value" ]]; then
  info "the task is gone and the new copy keeps its label $JOB_LABEL=$value (D4)"
fi
cp_kubectl get rb -n "$NS"
cp_kubectl get clusters
cp_kubectl get events -n "$NS" --field-selector "involvedObject.name=$NAME-flinkdeployment" \
  --sort-by=.lastTimestamp 2>/dev/null | (IFS= read -r header && printf '%s\n' "$header" && tail -n 8) || true

OK=1
step "Done: the Flink job failed over from $OLD to $NEW and resumed from its checkpoint"
