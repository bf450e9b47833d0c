#!/bin/bash
# How tests/corpus-extra/ib-fabric/*-ibsim-opensm-* were made (Debian 12: ibsim-utils 0.10, opensm 3.3.23,
# infiniband-diags 44): ibsim holds the fabric of NETFILE (ibsim-mini.net beside this script), opensm brings it up,
# ibsim's console sets three switch-port counters, and the real tools print it into OUTDIR. Both daemons are
# stopped by PID. Usage: ibsim-outputs.sh NETFILE OUTDIR
set -u
net=$1 out=$2
mkdir -p "$out/.state"
export IBSIM_SOCKNAME=fabricproof-$$ OSM_CACHE_DIR=$out/.state OSM_TMP_DIR=$out/.state
SO=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
sim="" osm=""
trap 'kill $osm $sim 2>/dev/null' EXIT
mkfifo "$out/.state/console"
ibsim -s "$net" < "$out/.state/console" > "$out/.state/ibsim.log" 2>&1 & sim=$!
exec 3>"$out/.state/console"
for _ in $(seq 1 50); do grep -q "simulator ready" "$out/.state/ibsim.log" && break; sleep 0.2; done
LD_PRELOAD=$SO opensm -d 2 -f "$out/.state/opensm.log" -F /dev/null > "$out/.state/opensm.out" 2>&1 & osm=$!
for _ in $(seq 1 100); do grep -q "SUBNET UP" "$out/.state/opensm.log" 2>/dev/null && break; sleep 0.3; done
echo 'PerformanceSet "S-0002c90300a00001"[3] PortCounters.SymbolErrorCounter=65535' >&3
echo 'PerformanceSet "S-0002c90300a00001"[3] PortCounters.LinkDownedCounter=3' >&3
echo 'PerformanceSet "S-0002c90300a00002"[2] PortCounters.PortRcvErrors=12' >&3
sleep 1
export LD_PRELOAD=$SO
timeout 30 ibnetdiscover > "$out/ibnetdiscover.txt" 2>/dev/null
timeout 30 ibnetdiscover -p > "$out/ibnetdiscover-p.txt" 2>/dev/null
timeout 30 iblinkinfo > "$out/iblinkinfo.txt" 2>/dev/null
timeout 30 ibqueryerrors > "$out/ibqueryerrors.txt" 2>/dev/null  # exits 1: it found errors
timeout 30 sminfo > "$out/sminfo.txt" 2>&1
unset LD_PRELOAD
echo quit >&3
exec 3>&-
kill $osm
wait $osm $sim 2>/dev/null
