"""The idle guard: a fixed sh script that runs a probe's argv only on a node doing no work, and stops it when the
session that started it ends (Ctrl-C, a lost connection), so no probe process outlives its run."""

from __future__ import annotations

from collections.abc import Sequence

from ..collectors.base import NOT_RUN_EXIT, NOT_RUN_MARKER

#: What the guard asks nvidia-smi: one line per GPU compute process, nothing when the GPUs are idle.
GPU_APPS = ("nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader")

# The probe's argv arrives as "$@" and is never spliced into the script. Refusals print one NOT_RUN_MARKER line and
# exit NOT_RUN_EXIT, which the run records as "skipped" with that reason.
#
# GPU work: any compute process refuses the node; so does an nvidia-smi that cannot answer (safety first: a node
# whose GPUs cannot be seen cannot be shown idle). Slurm: where scontrol exists, any job step process on the node
# (`scontrol listpids` rows start with a pid) refuses it; "No job steps exist on this node." (exit 1) is idle; if
# scontrol cannot answer otherwise while slurmd or a slurmstepd runs here, the node cannot be shown idle either;
# without slurmd and slurmstepd Slurm runs nothing here.
# A drain held by this run does not bypass any of this: a DRAINING node still runs its jobs' steps, and a drained
# one can still hold a stray GPU process. The drain is what keeps new jobs off the node while the probe runs.
#
# Then the probe runs as a child, and the guard watches its session: the session leader (the shell sshd started
# for the command, after setsid) and that leader's parent (sshd's session process, which ends with the connection).
# When one of them is gone, nobody will read the probe's output, so the guard ends the probe and its descendants
# (TERM, then KILL). Nearer ancestors are no sign: the transport's lanes outlive the subshell that started them. The transport's watchdog alone would leave it
# running until its own deadline: a shell blocked in `wait` does not notice its channel closing. A TERM to the
# guard (the watchdog at the probe's timeout) ends the probe the same way.
_SCRIPT = f"""\
m='{NOT_RUN_MARKER}' o=$1; shift
[ "$o" = watch ] || {{
q=$({" ".join(GPU_APPS)} 2>&1) || {{
  printf '%scannot tell whether the GPUs are idle: nvidia-smi --query-compute-apps failed: %.200s\\n' "$m" \\
    "$(printf '%s\\n' "$q" | head -n 1)"
  exit {NOT_RUN_EXIT}
}}
b=$(printf '%s\\n' "$q" | grep -v -e '^[[:space:]]*$' -e '^No running')
if [ -n "$b" ]; then
  printf '%s%d GPU compute process(es) running (pid, name, memory): %.300s\\n' "$m" "$(printf '%s\\n' "$b" | wc -l)" \\
    "$(printf '%s\\n' "$b" | head -n 3 | tr '\\n' ';')"
  exit {NOT_RUN_EXIT}
fi
if command -v scontrol >/dev/null 2>&1; then
  if j=$(scontrol listpids 2>&1); then
    j=$(printf '%s\\n' "$j" | grep '^[[:space:]]*[0-9]')
    if [ -n "$j" ]; then
      printf '%sSlurm job steps run on this node (scontrol listpids: %d processes): %.300s\\n' "$m" \\
        "$(printf '%s\\n' "$j" | wc -l)" "$(printf '%s\\n' "$j" | head -n 3 | tr -s ' \\n' ' ;')"
      exit {NOT_RUN_EXIT}
    fi
  elif case $j in *"No job steps exist on this node"*) true ;; *) false ;; esac; then
    :  # slurmd's own answer when nothing of Slurm runs here (exit 1)
  elif pgrep -x slurmd >/dev/null 2>&1 || pgrep -x slurmstepd >/dev/null 2>&1; then
    printf '%scannot tell whether Slurm jobs run here: scontrol listpids failed: %.200s\\n' "$m" \\
      "$(printf '%s\\n' "$j" | head -n 1)"
    exit {NOT_RUN_EXIT}
  fi
fi
}}
f() {{ read -r l <"/proc/$1/stat" || return 1; l=${{l##*) }}; set -- $l; echo "$2 $4"; }}
a=$(f $$) && a=${{a#* }} && p=$(f "$a") && p=${{p%% *}} || a=
[ "${{p:-0}}" -gt 1 ] && a="$a $p"
k() {{ for x in $(pgrep -P "$1" 2>/dev/null); do k "$x" "$2"; done; kill "-$2" "$1" 2>/dev/null; }}
"$@" & c=$!
trap 'k "$c" TERM; sleep 2; k "$c" KILL; exit 143' TERM INT HUP
while kill -0 "$c" 2>/dev/null; do
  for x in $a; do
    [ -d "/proc/$x" ] && continue
    k "$c" TERM; sleep 2; k "$c" KILL; exit 143
  done
  sleep 1 & wait $!
done
wait "$c"
"""

#: $0 of the guard's shell: what `ps` shows for it on the node.
NAME = "fabricproof-probe"


def script() -> str:
    return _SCRIPT


def guarded(argv: Sequence[str], check: bool = True) -> tuple[str, ...]:
    """The probe's argv behind the idle guard: `sh -c <fixed script> fabricproof-probe check|watch <argv...>`.

    check=False only watches the session: for the runs that follow an idle check of the node made for them (the
    servers and clients of one HCA probe would otherwise see each other's GPU buffers as work)."""
    if not argv:
        raise ValueError("empty probe argv")
    return ("sh", "-c", _SCRIPT, NAME, "check" if check else "watch", *argv)


#: An idle check alone: NOT_RUN_EXIT with the reason on a busy node, 0 on an idle one.
IDLE_CHECK = guarded(("true",))
