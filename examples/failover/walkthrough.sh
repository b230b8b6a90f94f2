#!/usr/bin/env bash
# A Flink job moved between two member clusters with its state, on one machine, with nothing but flotilla and
# kubectl, and nothing installed in the members: the control plane itself writes spec.job.initialSavepointPath
# into each new copy (native restore).
#
# It starts a control plane (flotilla apiserver on memory storage) and two simulated member clusters whose Flink
# simulator checkpoints every second, joins them, applies the manifests of this directory (namespace,
# ClusterTaintPolicy, FlinkDeployment and its PropagationPolicy), names the job's checkpoint and savepoint
# directories in its flinkConfiguration and starts the controller-manager with short timings. Then the job moves
# twice:
#
# 1. A planned move. A NoExecute taint on the member running the job, while that member is Ready (a maintenance
#    drain): the control plane stops the job with a savepoint, deletes the old copy and starts the new one in the
#    other member from that savepoint. No record is processed twice.
# 2. An unplanned failover. The member now running the job is powered off: its Ready condition turns False, the
#    ClusterTaintPolicy taints it NoExecute and the job is evicted with its job id as preserved state. With
#    purgeMode Directly nothing starts elsewhere until the old copy is known to be gone, so the walkthrough then
#    fences the dead member (flotilla fence), as an operator would, and the new copy starts from the newest
#    complete checkpoint of that job id. The records processed since that checkpoint are processed again.
#
# At the end, flotilla get failovers lists both moves with their state gap. Every process it started is stopped
# on exit.
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
FLINK_DIR="$WORK/flink"   # the job's checkpoint and savepoint storage, shared by both members
export KUBECONFIG="$CP_DIR/kubeconfig"

PIDS=()     # processes started here, in start order
TASK_WATCH=""  # the kubectl watch that records the binding's eviction tasks during a move
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
rb() { cp_kubectl get rb "$NAME-flinkdeployment" -n "$NS" "$@"; }
rb_annotation() {  # rb_annotation KEY : an annotation of the binding (empty when absent)
  rb -o "jsonpath={.metadata.annotations.${1//./\\.}}" 2>/dev/null || true
}
json() {  # json TEMPLATE : a JSONPath template on the JSON document on stdin (empty when it does not apply)
  "$FLOTILLA" jsonpath "$1" -f - 2>/dev/null || true
}
history_entry() {  # history_entry TEMPLATE : on the newest entry of the binding's failover history
  local h; h="$(rb_annotation failover.flotilla.io/history)"
  [[ -n "$h" ]] && printf '{"items": %s}' "$h" | json "{.items[0]${1}}"
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

step "Starting two simulated member clusters (nothing installed in them; a Flink checkpoint every second)"
start members "$FLOTILLA" member --count 2 --data-dir "$MEMBERS_DIR" --ready-delay 0.2 \
  --sim-option flink_checkpoint_interval=1 --sim-option flink_progress_interval=0.5 \
  --sim-option flink_status_progress_interval=0.5
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

step "Starting flotilla controller-manager with short timings (native restore holds a job it cannot restore)"
start controller-manager "$FLOTILLA" controller-manager --kubeconfig "$CP_DIR/kubeconfig" \
  --cluster-status-update-frequency 0.5s --cluster-success-threshold 1s --cluster-failure-threshold 1s \
  --graceful-eviction-timeout 30s --move-savepoint-timeout 20s --restore-missing hold
for m in "${MEMBERS[@]}"; do
  wait_for "$WAIT" "cluster $m to be Ready" \
    cp_kubectl wait --for=condition=Ready "cluster/$m" --timeout=1s
done
apis_known() { [[ -n "$(cp_kubectl get cluster "$1" -o 'jsonpath={.status.apiEnablements}')" ]]; }
for m in "${MEMBERS[@]}"; do
  wait_for "$WAIT" "the APIs $m serves to be known" apis_known "$m"
done
cp_kubectl get clusters

step "Applying the namespace and the FlinkDeployment, with its checkpoint storage in flinkConfiguration"
cp_kubectl apply -f "$HERE/00-namespace.yaml" -f "$HERE/20-flinkdeployment.yaml"
# where the job keeps its state: the directory every member can reach (on S3 this would be s3://bucket/...)
cp_kubectl patch flinkdeployment "$NAME" -n "$NS" --type merge -p "{\"spec\":{\"flinkConfiguration\":{
  \"execution.checkpointing.dir\":\"file://$FLINK_DIR/checkpoints\",
  \"execution.checkpointing.savepoint-dir\":\"file://$FLINK_DIR/savepoints\"}}}"
info "spec.flinkConfiguration: $(cp_kubectl get flinkdeployment "$NAME" -n "$NS" -o 'jsonpath={.spec.flinkConfiguration}')"

step "Applying its PropagationPolicy (one cluster, purgeMode Directly, the rule { .jobStatus.jobId })"
cp_kubectl apply -f "$HERE/21-flinkdeployment-policy.yaml"

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

has_checkpoint() {  # has_checkpoint MEMBER JOB_ID : the job's current run there completed a checkpoint
  local c; c="$(annotation "$1" sim.flotilla.io/last-checkpoint)" && [[ "$c" == *"/$2/chk-"* ]]
}
wait_for "$WAIT" "a completed checkpoint of the job in $OLD" has_checkpoint "$OLD" "$OLD_JOB_ID"
info "last checkpoint in $OLD: $(annotation "$OLD" sim.flotilla.io/last-checkpoint)"

binding_has_job_id() {  # binding_has_job_id CLUSTER JOB_ID : the control plane has the job's reflected status
  [[ "$(rb -o "jsonpath={.status.aggregatedStatus[?(@.clusterName==\"$1\")].status.jobStatus.jobId}")" == "$2" ]]
}
wait_for "$WAIT" "the job id in the binding's aggregated status (what the rule reads)" \
  binding_has_job_id "$OLD" "$OLD_JOB_ID"
info "the control plane has the job's reflected status; the rule { .jobStatus.jobId } gives $OLD_JOB_ID:"
rb -o "jsonpath={.status.aggregatedStatus[?(@.clusterName==\"$OLD\")].status}" \
  | "$FLOTILLA" jsonpath '{ .jobStatus.jobId }' -f - | sed 's/^/    /'
echo
cp_kubectl get rb -n "$NS"

# ------------------------------------------------------------------------------------------------- helpers of a move

# a watch sees every version of the binding, so an eviction task is shown however briefly it exists (one line per
# version: the tasks as JSON, empty when there are none; a {range} would end the watch at the first version
# without tasks)
TASKS=""
watch_tasks() {  # watch_tasks FILE : record the binding's eviction tasks in FILE from now on
  stop_task_watch
  TASKS="$1"
  TASK_SHOWN=0
  rb --watch -o 'jsonpath={.spec.gracefulEvictionTasks}{"\n"}' >"$TASKS" 2>/dev/null &
  TASK_WATCH=$!
  sleep 0.5  # the watch is open before the move starts
}
stop_task_watch() {
  if [[ -n "$TASK_WATCH" ]]; then kill "$TASK_WATCH" 2>/dev/null || true; wait "$TASK_WATCH" 2>/dev/null || true; fi
  TASK_WATCH=""
}
show_task() {  # the first eviction task the watch saw, once
  local task
  if [[ "$TASK_SHOWN" == 0 ]]; then
    task="$(grep -m1 . "$TASKS" 2>/dev/null || true)"
    if [[ -n "$task" ]]; then
      task="$(printf '{"items": %s}' "$task" | json \
        '{range .items[*]}fromCluster={.fromCluster} purgeMode={.purgeMode} preservedLabelState={.preservedLabelState}{end}')"
      info "eviction task on the binding: $task"
      TASK_SHOWN=1
    fi
  fi
}
tasks_done() {
  local t
  t="$(rb -o 'jsonpath={.spec.gracefulEvictionTasks}')" || return 1
  [[ -z "$t" || "$t" == "[]" ]]
}
completed_from() {  # completed_from CLUSTER : the newest failover in the history left CLUSTER and is Completed
  [[ "$(history_entry '.from')" == "$1" && "$(history_entry '.phase')" == Completed ]]
}
show_move() {  # the planned move's record, whenever its phase changes
  local move phase
  move="$(rb_annotation failover.flotilla.io/move)"
  phase="$(printf '%s' "$move" | json '{.phase}')"
  if [[ -n "$phase" && "$phase" != "$PHASE" ]]; then
    PHASE="$phase"
    info "planned move (failover.flotilla.io/move): $(printf '%s' "$move" \
      | json 'trigger={.trigger} phase={.phase} reason="{.reason}"')"
  fi
}
show_restore() {  # show_restore MEMBER : what the control plane wrote into the new copy, and how the job started
  local record
  NEW_PATH="$(flink_field "$1" '{.spec.job.initialSavepointPath}' 2>/dev/null || true)"
  record="$(rb_annotation failover.flotilla.io/restore)"
  RECORD_OUTCOME="$(printf '%s' "$record" | json '{.outcome}')"
  RECORD_PATH="$(printf '%s' "$record" | json '{.path}')"
  RESTORED_FROM="$(annotation "$1" sim.flotilla.io/restored-from || true)"
  RESTORED_OFFSET="$(annotation "$1" sim.flotilla.io/restored-offset || true)"
  info "the control plane wrote spec.job.initialSavepointPath=$NEW_PATH" \
    "(upgradeMode $(flink_field "$1" '{.spec.job.upgradeMode}' 2>/dev/null || true))"
  info "recorded on the binding (failover.flotilla.io/restore): $(printf '%s' "$record" \
    | json 'outcome={.outcome} kind={.kind} reason="{.reason}" ageAtFault={.ageAtFault}')"
  info "the job in $1 restored from $RESTORED_FROM at record $RESTORED_OFFSET" \
    "(job id $(flink_field "$1" '{.status.jobStatus.jobId}'))"
  [[ -n "$NEW_PATH" ]] || fail "the new copy in $1 has no spec.job.initialSavepointPath"
  [[ "$RECORD_OUTCOME" == Restored && "$RECORD_PATH" == "$NEW_PATH" ]] \
    || fail "the restore record says outcome '$RECORD_OUTCOME', path '$RECORD_PATH'"
  [[ "$RESTORED_FROM" == "$NEW_PATH" ]] || fail "the job restored from '$RESTORED_FROM', not '$NEW_PATH'"
  ((RESTORED_OFFSET > 0)) || fail "the job restarted from record 0"
}

# ------------------------------------------------------------------------------------------------- a planned move

watch_tasks "$WORK/eviction-tasks-1.txt"

step "Planned move: tainting $OLD with $TAINT_KEY:NoExecute while it is Ready (a maintenance drain)"
cp_kubectl patch cluster "$OLD" --type merge \
  -p "{\"spec\":{\"taints\":[{\"key\":\"$TAINT_KEY\",\"effect\":\"NoExecute\"}]}}"

step "Watching the job move from $OLD to $NEW: a savepoint in $OLD first, then the new copy from it"
SEEN_LABEL=""
PHASE=""
moved=0
deadline=$((SECONDS + WAIT))
while ((SECONDS < deadline)); do
  check_alive
  show_task
  show_move
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
show_move
[[ "$PHASE" == Done ]] || fail "the planned move ended in phase '$PHASE', not Done (no savepoint)"
[[ -z "$SEEN_LABEL" || "$SEEN_LABEL" == "$OLD_JOB_ID" ]] \
  || fail "the label $JOB_LABEL on the new copy was '$SEEN_LABEL', not $OLD_JOB_ID"
info "$NAME now runs only in $NEW; the copy in $OLD is gone"
show_restore "$NEW"
[[ "$NEW_PATH" == *"/savepoint-${OLD_JOB_ID:0:6}-"* ]] \
  || fail "the new copy did not start from a savepoint of job $OLD_JOB_ID (path: '$NEW_PATH')"
wait_for "$WAIT" "the failover history to record the move as Completed" completed_from "$OLD"
AGAIN="$(history_entry '.stateGap.recordsReprocessed')"
[[ "$AGAIN" == 0 ]] || fail "the planned move processed '$AGAIN' records again, not 0"
echo "planned move: job id $OLD_JOB_ID moved from $OLD to $NEW: restored from savepoint $NEW_PATH," \
  "$AGAIN records processed again"

step "Ending the maintenance: removing the taint from $OLD (the job stays in $NEW)"
cp_kubectl patch cluster "$OLD" --type merge -p '{"spec":{"taints":null}}'
wait_for "$WAIT" "the eviction task to be removed once the new copy is healthy" tasks_done
value="$(label "$NEW" "$JOB_LABEL" || true)"
[[ -z "$value" ]] || info "the task is gone and the new copy keeps its label $JOB_LABEL=$value (D4)"
stop_task_watch

# ------------------------------------------------------------------------------------------------- a failure

JOB2="$(flink_field "$NEW" '{.status.jobStatus.jobId}')"
step "Waiting for the job in $NEW (job id $JOB2) to complete a checkpoint of its own"
wait_for "$WAIT" "a completed checkpoint of job $JOB2 in $NEW" has_checkpoint "$NEW" "$JOB2"
wait_for "$WAIT" "the job id $JOB2 in the binding's aggregated status" binding_has_job_id "$NEW" "$JOB2"
info "last checkpoint in $NEW: $(annotation "$NEW" sim.flotilla.io/last-checkpoint)" \
  "(records processed: $(annotation "$NEW" sim.flotilla.io/records-processed))"

watch_tasks "$WORK/eviction-tasks-2.txt"

step "Unplanned failover: powering $NEW off (flotilla sim fault $NEW --mode off)"
"$FLOTILLA" sim fault "$NEW" --mode off --data-dir "$MEMBERS_DIR" >/dev/null
info "$NEW refuses connections and its Flink job has stopped; its last checkpoint is final"
not_ready() {
  [[ "$(cp_kubectl get cluster "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" == False ]]
}
wait_for "$WAIT" "cluster $NEW to turn not Ready" not_ready "$NEW"
evicted() { [[ -n "$(grep -m1 . "$TASKS" 2>/dev/null || true)" ]]; }
wait_for "$WAIT" "the ClusterTaintPolicy's taint to evict the job from $NEW" evicted
show_task
"$FLOTILLA" get clusters --kubeconfig "$CP_DIR/kubeconfig"
sleep 1
absent_in "$OLD" || fail "$NAME started in $OLD while $NEW was not fenced"
info "purgeMode Directly: the new copy waits until the copy in $NEW is known to be gone," \
  "and $NEW cannot be reached to delete it"

step "Fencing $NEW: the operator confirms it is powered off (flotilla fence $NEW)"
"$FLOTILLA" fence "$NEW" --kubeconfig "$CP_DIR/kubeconfig" 2>&1 | sed 's/^/    /'

step "Watching the job start in $OLD from the newest checkpoint of job $JOB2"
SEEN_LABEL=""
moved=0
deadline=$((SECONDS + WAIT))
while ((SECONDS < deadline)); do
  check_alive
  value="$(label "$OLD" "$JOB_LABEL" || true)"
  if [[ -n "$value" && -z "$SEEN_LABEL" ]]; then
    SEEN_LABEL="$value"
    info "the new copy in $OLD was created with the label $JOB_LABEL=$value"
  fi
  if running_in "$OLD" && [[ -n "$(annotation "$OLD" sim.flotilla.io/records-processed 2>/dev/null || true)" ]]; then
    moved=1
    break
  fi
  sleep 0.1
done
((moved)) || fail "$NAME did not end up RUNNING in $OLD within ${WAIT}s"
[[ -z "$SEEN_LABEL" || "$SEEN_LABEL" == "$JOB2" ]] \
  || fail "the label $JOB_LABEL on the new copy was '$SEEN_LABEL', not $JOB2"
show_restore "$OLD"
[[ "$NEW_PATH" == *"/$JOB2/chk-"* ]] \
  || fail "the new copy did not start from a checkpoint of job $JOB2 (path: '$NEW_PATH')"
wait_for "$WAIT" "the failover history to record the failover as Completed" completed_from "$NEW"
AGAIN="$(history_entry '.stateGap.recordsReprocessed')"
echo "failover: job id $JOB2 carried over from $NEW to $OLD: restored from checkpoint $NEW_PATH," \
  "$AGAIN records processed again"
stop_task_watch

step "The binding's Events of both moves"
cp_kubectl get events -n "$NS" --field-selector "involvedObject.name=$NAME-flinkdeployment" \
  --sort-by=.lastTimestamp 2>/dev/null \
  | (IFS= read -r header && printf '%s\n' "$header" \
     && grep -E 'PlannedMove|SavepointTaken|StateRestore|FailoverCompleted') || true

step "The failover history: flotilla get failovers $NAME -n $NS"
"$FLOTILLA" get failovers "$NAME" -n "$NS" --kubeconfig "$CP_DIR/kubeconfig"

OK=1
step "Done: a planned move with a savepoint ($OLD -> $NEW), then a failover from a checkpoint ($NEW -> $OLD);" \
  "$NEW stays powered off and fenced"
